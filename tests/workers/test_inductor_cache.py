import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from mlcbench.workers.stacks import inductor_cache
from mlcbench.workers.stacks.inductor_cache import (CACHE_VARIABLES, compile_for_warm_start, compile_kept,
                                                     recheck_autotune_cache, warm_start_caches)


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


def _scaled(model, x):
    return model(x)


def test_a_warm_start_compile_guards_a_modules_tensors_and_not_its_other_attributes(monkeypatch):
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
    model, x = _Scaled(), torch.ones(4)
    assert compiled(model, x).tolist() == [2.0] * 4
    assert ("model.factor", False) in decided and ("x", True) in decided
    model.factor = 3.0  # an attribute the job's cache folder fixes: not guarded, so not traced again
    compiled(model, x)
    assert counter.frame_count == 1
    model.weight = torch.nn.Parameter(torch.ones(4, dtype=torch.float64))  # its tensors still are
    assert compiled(model, x).dtype == torch.float64
    assert counter.frame_count == 2
    torch._dynamo.reset()


def counted_compiles(monkeypatch) -> list[str]:
    compiled = []

    def counting(source, filename, mode, dont_inherit=False):
        compiled.append(filename)
        return compile(source, filename, mode, dont_inherit=dont_inherit)

    monkeypatch.setattr(inductor_cache, "compile", counting, raising=False)
    return compiled


def run_module(code) -> dict:
    namespace = {}
    exec(code, namespace)
    return namespace


def test_a_module_is_compiled_once_and_its_bytecode_loaded_after(tmp_path, monkeypatch):
    compiled = counted_compiles(monkeypatch)
    path = str(tmp_path / "wrapper.py")
    source = "def call(x):\n    return x * 3\n"
    assert run_module(compile_kept(source, path, "exec", dont_inherit=True))["call"](2) == 6
    assert run_module(compile_kept(source, path, "exec", dont_inherit=True))["call"](2) == 6
    assert compiled == [path]
    assert run_module(compile_kept(source.replace("3", "4"), path, "exec", dont_inherit=True))["call"](2) == 8
    assert compiled == [path, path]


def test_a_kept_module_that_does_not_load_is_compiled_again(tmp_path, monkeypatch):
    compiled = counted_compiles(monkeypatch)
    path = str(tmp_path / "wrapper.py")
    compile_kept("answer = 42\n", path, "exec")
    [kept] = tmp_path.glob("wrapper.py.*.code")
    kept.write_bytes(kept.read_bytes()[:5])
    assert run_module(compile_kept("answer = 42\n", path, "exec"))["answer"] == 42
    assert len(compiled) == 2 and run_module(compile_kept("answer = 42\n", path, "exec"))["answer"] == 42
    assert len(compiled) == 2


def test_the_same_source_at_another_path_is_compiled_for_that_path(tmp_path, monkeypatch):
    # a kernel's source is read back from the code's own file name (triton.jit): a code object must name its file
    counted_compiles(monkeypatch)
    first, second = str(tmp_path / "a.py"), str(tmp_path / "b.py")
    compile_kept("x = 1\n", first, "exec")
    assert compile_kept("x = 1\n", second, "exec").co_filename == second


def test_inductors_modules_load_from_kept_bytecode_inside_a_warm_start_block(tmp_path, monkeypatch):
    from torch._inductor.codecache import PyCodeCache
    from torch._inductor.runtime import compile_tasks

    torch._dynamo.reset()
    with warm_start_caches(tmp_path, torch.device("cpu")):
        assert torch.compile(lambda x: (x * 2).sin())(torch.ones(4)).tolist() == [torch.sin(torch.tensor(2.0))] * 4
        loaded = [module.__file__ for module in PyCodeCache.modules]
    assert loaded and all(list(Path(path).parent.glob(Path(path).name + ".*.code")) for path in loaded)
    assert "compile" not in vars(compile_tasks)
    compiled = counted_compiles(monkeypatch)
    with warm_start_caches(tmp_path, torch.device("cpu")):
        PyCodeCache.cache_clear()
        for path in loaded:
            PyCodeCache.load_by_key_path(Path(path).stem, path)
    assert compiled == []
    torch._dynamo.reset()
