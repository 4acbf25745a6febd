"""The worker's code in every cache key that hands a program or an output to a later process (workers/stacks/code_key.py):
an edit of any worker or schema source file, a module attribute's value included, moves the JAX traces' folder,
Inductor's and dynamo's precompile folder and eager's reference key; the same files elsewhere do not. Through the CLI:
tests/workers/test_planted_checks_cli.py."""

import shutil

import pytest
import torch

from mlcbench.workers.measurement.references import ReferenceKey
from mlcbench.workers.stacks import code_key, inductor_cache, jax_traces
from tests.workers.test_reference_cache import synthetic_job


@pytest.fixture
def sources_copy(tmp_path, monkeypatch):
    """code_key hashing a copy of the worker and schema packages, its cache cleared before and after."""
    copies = {}
    for package, root in code_key.SOURCES.items():
        copies[package] = tmp_path / package
        shutil.copytree(root, copies[package], ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(code_key, "SOURCES", copies)
    code_key.worker_code.cache_clear()
    yield copies
    code_key.worker_code.cache_clear()


def _keys() -> dict[str, str]:
    code_key.worker_code.cache_clear()
    return {"code": code_key.worker_code(), "traces": jax_traces.trace_key({"model": "m", "options": "{}"}),
            "inductor": inductor_cache.current_key(torch.device("cpu")),
            "reference": ReferenceKey.of(synthetic_job()).worker_code}


def test_the_same_files_elsewhere_give_the_same_keys(sources_copy, monkeypatch):
    copied = _keys()
    monkeypatch.undo()
    assert _keys() == copied


@pytest.mark.parametrize("package,module", [("workers", "decode/static_llama.py"), ("workers", "models/synthetic.py"),
                                            ("schema", "jobs.py")])
def test_a_changed_module_attribute_moves_every_caches_key(sources_copy, package, module):
    before = _keys()
    path = sources_copy[package] / module
    path.write_text(path.read_text() + "\nPLANTED_ATTRIBUTE = 1.25\n")
    after = _keys()
    assert all(after[cache] != before[cache] for cache in before), (before, after)


def test_the_code_is_hashed_once_per_process(monkeypatch):
    code_key.worker_code()
    monkeypatch.setattr(code_key.Path, "read_bytes", lambda path: pytest.fail("hashed again"))
    code_key.worker_code()
