import os

import pytest
import torch

from mlcbench.workers.stacks.inductor_cache import CACHE_VARIABLES, warm_start_caches


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
