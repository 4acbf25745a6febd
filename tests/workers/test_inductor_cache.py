import os
from types import SimpleNamespace

import pytest
import torch

from mlcbench.workers.stacks.inductor_cache import (CACHE_VARIABLES, compile_for_warm_start, recheck_autotune_cache,
                                                     warm_start_caches)


@pytest.mark.parametrize("precompile_shape", [None, "llama-2layer-random-fp32-b1-in8-out6"])
@pytest.mark.parametrize("before", ["set", "unset"])
def test_the_cache_variables_are_as_they_were_after_a_warm_start_block(tmp_path, monkeypatch, precompile_shape,
                                                                         before):
    for name in CACHE_VARIABLES:
        if before == "set":
            monkeypatch.setenv(name, str(tmp_path / "before" / name))
        else:
            monkeypatch.delenv(name, raising=False)
    expected = {name: os.environ.get(name) for name in CACHE_VARIABLES}
    with warm_start_caches(tmp_path / "cache", torch.device("cpu"), precompile_shape):
        inside = {name: os.environ[name] for name in CACHE_VARIABLES}
    assert all(value.startswith(str(tmp_path / "cache" / "inductor")) for value in inside.values())
    assert {name: os.environ.get(name) for name in CACHE_VARIABLES} == expected


class StoredKernel:
    """What recheck_autotune_cache reads of a CachingAutotuner loaded from Inductor's caches."""

    def __init__(self, *configs):
        self.compile_results = [SimpleNamespace(config=config) for config in configs]
        self.filename, self.inductor_meta = "kernel.py", {"coordinate_descent_tuning": True}
        self.fn = SimpleNamespace(fn=None)
        self.compiled = []

    def _precompile_config(self, config):
        self.compiled.append(config)
        return SimpleNamespace(config=config)


def config(block: int, warps: int = 4):
    return SimpleNamespace(kwargs={"XBLOCK": block}, num_warps=warps, num_stages=1)


def stored_best(monkeypatch, best):
    from torch._inductor.runtime import triton_heuristics

    monkeypatch.setattr(triton_heuristics, "check_autotune_cache",
                        lambda configs, filename, meta: ([best], None, {"autotune_cache_state": "hit"}))


def test_a_one_config_kernel_keeps_the_config_coordinate_descent_found_in_an_earlier_process(monkeypatch):
    # torch 2.11 skipped this case: the kernel ran coordinate descent again at its first run
    stored = config(64)
    stored.found_by_coordesc = True
    stored_best(monkeypatch, stored)
    kernel = StoredKernel(config(64))
    recheck_autotune_cache(kernel, reload_kernel_from_src=None)
    assert len(kernel.compile_results) == 1 and kernel.compile_results[0].config.found_by_coordesc
    assert kernel.compiled == []


def test_a_tuned_config_the_kernel_was_not_stored_with_is_compiled_at_load(monkeypatch):
    stored = config(256, warps=8)
    stored.found_by_coordesc = True
    stored_best(monkeypatch, stored)
    kernel = StoredKernel(config(64), config(128))
    recheck_autotune_cache(kernel, reload_kernel_from_src=lambda: SimpleNamespace(fn="reloaded source"))
    assert kernel.compiled == [stored] and kernel.fn == "reloaded source"
    assert [result.config for result in kernel.compile_results] == [stored]


@pytest.mark.parametrize("version,patched", [("2.11.0+cu130", True), ("2.12.0", False), ("2.13.0+cpu", False)])
def test_the_fix_stands_in_for_torch_before_2_12_inside_the_block_only(tmp_path, monkeypatch, version, patched):
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    original = CachingAutotuner.recheck_autotune_cache
    monkeypatch.setattr(torch, "__version__", version)
    with warm_start_caches(tmp_path, torch.device("cpu")):
        assert (CachingAutotuner.recheck_autotune_cache is recheck_autotune_cache) == patched
    assert CachingAutotuner.recheck_autotune_cache is original


class _Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(4))
        self.factor = 2.0

    def forward(self, x):
        return x * self.weight * self.factor


class _Cache:
    """An object handed to the compiled function beside the model (as generate() hands it a KV cache)."""

    def __init__(self):
        self.offset = 1.0
        self.buffer = torch.zeros(4)


def _scaled(model, cache, x):
    return model(x) + cache.buffer + cache.offset


def test_a_warm_start_compile_guards_tensors_shapes_and_grad_mode_and_not_other_attributes(monkeypatch):
    from torch._dynamo.testing import CompileCounter

    from mlcbench.workers.stacks import inductor_cache

    decided, filter_guards = [], inductor_cache.guards_kept

    def recorded(entries):
        kept = filter_guards(entries)
        decided.extend(zip((entry.name for entry in entries), kept))
        return kept

    monkeypatch.setattr(inductor_cache, "guards_kept", recorded)
    torch._dynamo.reset()
    counter = CompileCounter()
    compiled = compile_for_warm_start(_scaled, backend=counter, fullgraph=True)
    model, cache, x = _Scaled(), _Cache(), torch.ones(4)
    assert compiled(model, cache, x).tolist() == [3.0] * 4
    assert ("model.factor", False) in decided and ("cache.offset", False) in decided and ("x", True) in decided
    # attributes the job's cache folder fixes: not guarded, so not traced again
    model.factor, cache.offset = 3.0, 5.0
    compiled(model, cache, x)
    assert counter.frame_count == 1
    model.weight = torch.nn.Parameter(torch.ones(4, dtype=torch.float64))  # the tensors still are
    assert compiled(model, cache, x).dtype == torch.float64
    assert counter.frame_count == 2
    cache.buffer = torch.zeros(1)  # a tensor of another object, of another shape
    compiled(model, cache, x)
    assert counter.frame_count == 3
    with torch.no_grad():  # and the process's global state
        compiled(model, cache, x)
    assert counter.frame_count == 4
    torch._dynamo.reset()


class _Counting:
    """A cache that counts its tokens in a Python int, as transformers' sliding-window cache layer does."""

    def __init__(self):
        self.tokens = 32
        self.buffer = torch.zeros(4)


def _counted(cache, x):
    cache.tokens += 1
    return x * cache.tokens + cache.buffer


def test_a_warm_start_compile_guards_an_int_a_call_s_state_carries():
    """Without the guard, every call ran the graph traced at the first, with its count: Mistral's static-cache decode
    parted from eager's by a relative L2 of 0.2-0.5."""
    torch._dynamo.reset()
    compiled = compile_for_warm_start(_counted, backend="eager", fullgraph=True)
    cache, x = _Counting(), torch.ones(4)
    assert [compiled(cache, x)[0].item() for _ in range(3)] == [33.0, 34.0, 35.0]
    torch._dynamo.reset()
