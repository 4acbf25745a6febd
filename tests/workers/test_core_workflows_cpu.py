"""Each core workflow on the CPU, through the worker's own run_job, checked against eager."""

from pathlib import Path

import pytest

from mlcbench.schema import JobSpec
from mlcbench.workers.runner import run_job


def synthetic(workflow: str, model: str = "ffn-small", **overrides) -> JobSpec:
    return JobSpec(**{"model": model, "workflow": workflow, "precision": "fp32", "batch_size": 2, "device": "cpu",
                      "warmup": 1, "repeats": 3, **overrides})


@pytest.mark.parametrize("workflow", ["torch_compile", "aot_inductor", "onnxruntime"])
def test_synthetic_workflow_matches_eager(tmp_path, workflow):
    result = run_job(synthetic(workflow), tmp_path)
    assert result.status == "ok", result.error
    assert result.correctness.passed and result.correctness.input_sets == 3
    assert result.correctness.rel_l2_error < 1e-4
    assert result.metrics.tflops > 0 and result.metrics.compile_s > 0
    assert result.metrics.compiled_code_ran is True  # its call dispatched other ops than eager's (or none)
    assert result.metrics.latency.method == "perf_counter"
    if workflow == "torch_compile":  # Inductor's cache in its default folder: warm when an earlier run filled it
        assert result.metrics.compile_cache in ("cold", "warm")


def test_eager_synthetic_has_exact_flops_and_no_correctness_check(tmp_path):
    result = run_job(synthetic("eager", model="ffn-multilayer-small"), tmp_path)
    assert result.status == "ok"
    assert result.correctness is None and result.metrics.compile_cache is None
    # 4 FFN layers x 2 matmuls x 2 flops x (2 x 32 tokens) x 256 x 704
    assert result.metrics.flops == 4 * 2 * 2 * 64 * 256 * 704
    assert result.metrics.tflops == pytest.approx(result.metrics.flops / result.metrics.latency.median_ms / 1e9)


@pytest.mark.parametrize("workflow", ["eager", "torch_compile"])
def test_a_synthetic_job_records_the_compile_facts_an_llm_job_does(tmp_path, workflow):
    """One measurement core for both kinds: graphs compiled, graph breaks, recompiles and dynamo's compile phases (the
    LLM rows had them; synthetic rows did not, so "not compiled" could not see them)."""
    result = run_job(synthetic(workflow), tmp_path)
    assert result.status == "ok", result.error
    metrics = result.metrics
    assert metrics.settings["prepare_s"] >= 0 and metrics.settings["first_call_s"] > 0
    if workflow == "eager":
        assert metrics.applied.compiled_graphs == 0 and metrics.graph_breaks is None and metrics.recompiles is None
        assert metrics.compiler_import_s is None
    else:
        assert metrics.compiler_import_s >= 0
        assert metrics.applied.compiled_graphs == 1 and metrics.graph_breaks == 0 and metrics.recompiles == 0
        assert metrics.settings["dynamo_trace_s"] > 0 and metrics.settings["backend_s"] > 0


def test_the_compiler_is_imported_before_the_compile_is_timed_and_its_import_measured_apart(tmp_path, monkeypatch):
    import sys

    from mlcbench.schema import WORKFLOWS
    from mlcbench.workers.measurement import core
    from mlcbench.workers.measurement.synthetic import Synthetic

    (tmp_path / "slow_compiler.py").write_text("import time\ntime.sleep(0.3)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "slow_compiler", raising=False)
    monkeypatch.setitem(WORKFLOWS, "torch_compile",
                        WORKFLOWS["torch_compile"].model_copy(update={"compiler_modules": ("slow_compiler",)}))
    build, imported_at_build = Synthetic.build, []

    def noting_build(self):
        imported_at_build.append("slow_compiler" in sys.modules)
        build(self)

    monkeypatch.setattr(Synthetic, "build", noting_build)
    result = run_job(synthetic("torch_compile"), tmp_path / "cache")
    assert result.status == "ok", result.error
    assert result.metrics.compiler_import_s >= 0.3 and imported_at_build == [True]
    assert core.import_compiler("eager") is None


def test_the_install_keys_are_hashed_on_a_thread_while_the_model_builds(tmp_path, monkeypatch):
    """Inductor's caches are keyed by hashes of torch's and Triton's installs, which the first compile would compute:
    a thread computes them while the model builds, and the compile no longer waits for them."""
    import threading
    import time

    from mlcbench.workers.measurement.synthetic import Synthetic
    from mlcbench.workers.stacks import inductor_cache

    events: dict[str, float] = {}
    threads = []

    def slow_key():
        threads.append(threading.current_thread())
        time.sleep(0.3)
        events["key_done"] = time.perf_counter()

    monkeypatch.setattr(inductor_cache, "install_keys", lambda: [slow_key])
    build = Synthetic.build

    def noting_build(self):
        events["build_begun"] = time.perf_counter()
        build(self)

    monkeypatch.setattr(Synthetic, "build", noting_build)
    result = run_job(synthetic("torch_compile"), tmp_path / "cache")
    assert result.status == "ok", result.error
    assert result.metrics.settings["install_keys_s"] >= 0.3
    assert threads and threads[0] is not threading.main_thread()
    assert events["build_begun"] < events["key_done"]
    threads.clear()
    eager = run_job(synthetic("eager"), tmp_path / "cache")
    assert "install_keys_s" not in eager.metrics.settings and not threads


def test_a_key_that_fails_on_its_thread_leaves_the_job_standing_and_says_why(tmp_path, monkeypatch):
    from mlcbench.workers.stacks import inductor_cache

    def broken_key():
        raise OSError("no such file: libtriton.so")

    monkeypatch.setattr(inductor_cache, "install_keys", lambda: [broken_key])
    result = run_job(synthetic("torch_compile"), tmp_path / "cache")
    assert result.status == "ok", result.error
    assert result.metrics.settings["install_keys_error"] == "OSError: no such file: libtriton.so"
    assert "install_keys_s" not in result.metrics.settings


def test_the_keys_hashed_ahead_are_the_ones_inductor_reads():
    from torch._inductor import codecache

    from mlcbench.workers.stacks import inductor_cache

    assert codecache.torch_key in inductor_cache.install_keys()
    assert inductor_cache.hash_installs_ahead().result() >= 0
    assert isinstance(codecache.torch_key(), bytes)


def test_onnxruntime_without_io_binding_on_cpu_records_it(tmp_path):
    result = run_job(synthetic("onnxruntime", options={"io_binding": False}), tmp_path)
    assert result.status == "ok" and result.metrics.applied.io_binding is False
    assert "CPUExecutionProvider" in result.metrics.applied.execution_providers


def test_cuda_job_without_a_gpu_is_unsupported_with_the_reason(tmp_path):
    result = run_job(synthetic("eager", device="cuda"), tmp_path)
    assert result.status == "unsupported" and "no GPU" in result.reason


def llm(workflow: str, **overrides) -> JobSpec:
    return JobSpec(**{"model": "llama-2layer", "workflow": workflow, "precision": "fp32", "batch_size": 2,
                      "output_len": 6, "device": "cpu", "warmup": 1, "repeats": 2, **overrides})


@pytest.mark.parametrize("workflow", ["eager", "torch_compile", "torch_compile_forward", "torch_compile_static"])
def test_llm_generates_exactly_output_len_tokens_and_checks_against_eager(tmp_path, workflow):
    job = llm(workflow)
    result = run_job(job, tmp_path)
    assert result.status == "ok", result.error
    metrics = result.metrics
    assert metrics.output_tokens == 6
    assert metrics.tokens_per_s == pytest.approx(2 * 6 / (metrics.latency.median_ms / 1e3))
    assert 0 < metrics.ttft_ms and 0 < metrics.tpot_ms
    assert metrics.applied.decode_loop == "hf_generate"
    if workflow == "eager":
        assert result.correctness is None and metrics.graph_breaks is None
    else:
        assert result.correctness.passed and result.correctness.token_agreement == 1.0
        assert result.correctness.cosine > 0.9999
        assert metrics.graph_breaks == 0
    if workflow == "torch_compile_static":
        assert metrics.applied.kv_cache == "static" and metrics.applied.compiled_graphs >= 1
    if workflow == "torch_compile":  # the paper's recipe: generate() bypasses the compiled wrapper
        assert metrics.applied.compiled_graphs == 0
    if workflow == "torch_compile_forward":
        assert metrics.applied.kv_cache == "dynamic" and metrics.applied.compiled_graphs >= 1


def test_llm_from_a_saved_checkpoint_folder(tmp_path):
    import torch

    from mlcbench.schema import MODELS
    from mlcbench.workers.models import llm as llm_models

    model = llm_models.build(MODELS["llama-2layer"], llm("eager"), torch.float32, torch.device("cpu"))
    model.save_pretrained(tmp_path / "ckpt")
    result = run_job(llm("eager", model_path=str(tmp_path / "ckpt")), tmp_path)
    assert result.status == "ok", result.error
    assert result.metrics.output_tokens == 6


def test_a_workflow_that_compiles_nothing_never_imports_dynamo_and_reports_no_compile(tmp_path):
    """Reading dynamo's counters imported it in every eager process, about a second before the first timed call."""
    import subprocess
    import sys

    code = ("import sys; from pathlib import Path; from mlcbench.workers.runner import run_job; "
            "from tests.workers.test_core_workflows_cpu import synthetic; "
            f"result = run_job(synthetic('eager'), Path({str(tmp_path)!r})); "
            "print(result.status, result.metrics.applied.compiled_graphs, 'torch._dynamo' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.stdout.split() == ["ok", "0", "False"], done.stderr[-2000:]


@pytest.mark.parametrize("version,refused", [("2.11.0+cu130", True), ("2.11.1", True), ("2.12.0.dev20260301", False),
                                             ("2.13.0+cpu", False)])
def test_aot_inductor_is_unsupported_at_once_on_a_torch_whose_package_loader_segfaults(tmp_path, monkeypatch,
                                                                                      version, refused):
    """torch 2.11's loader crashed the worker ≈ 45 s into each cell on the GPU: refused before anything compiles."""
    import torch

    from mlcbench.workers.workflows import aot_inductor

    assert aot_inductor.loader_segfaults(version) is refused
    if not refused:
        return
    compiled = []
    monkeypatch.setattr(torch, "__version__", torch.torch_version.TorchVersion(version))
    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package", lambda *args, **kwargs: compiled.append(1))
    result = run_job(synthetic("aot_inductor"), tmp_path)
    assert result.status == "unsupported" and "segfaults" in result.reason and version in result.reason
    assert compiled == []
