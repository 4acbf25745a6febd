"""The TensorRT-LLM workflow against stand-in tensorrt_llm packages of 0.18 (engine builds) and 1.1 (PyTorch
backend). The stand-in LLM loads the Hugging Face folder the workflow saved and decodes greedily with transformers,
so the saved model, the prompt hand-over and the token comparison are all checked for real."""

import gc
import sys
import types

import pytest
import torch

from mlcbench.schema import JobSpec
from mlcbench.workers.runner import run_job


class Recorder:
    def __init__(self, **kwargs):
        self.kwargs = kwargs


@pytest.fixture
def fake_trtllm(monkeypatch):
    def install(version):
        calls = {"llm": [], "sampling": [], "shutdown": 0}

        class SamplingParams(Recorder):
            def __init__(self, **kwargs):
                super().__init__(**kwargs)
                calls["sampling"].append(kwargs)

        class LLM:
            def __init__(self, **kwargs):
                from transformers import AutoModelForCausalLM

                calls["llm"].append(kwargs)
                self.model = AutoModelForCausalLM.from_pretrained(kwargs["model"]).eval()

            def generate(self, prompts, params, use_tqdm=True):
                n = params.kwargs["max_tokens"]
                with torch.no_grad():
                    out = self.model.generate(torch.tensor(prompts), do_sample=False, max_new_tokens=n,
                                              min_new_tokens=n, pad_token_id=params.kwargs["pad_id"])
                return [types.SimpleNamespace(outputs=[types.SimpleNamespace(token_ids=row[len(prompts[0]):].tolist())])
                        for row in out]

            def shutdown(self):
                calls["shutdown"] += 1

        package = types.ModuleType("tensorrt_llm")
        package.__version__ = version
        package.LLM, package.SamplingParams = LLM, SamplingParams
        llmapi = types.ModuleType("tensorrt_llm.llmapi")
        llmapi.KvCacheConfig = Recorder
        if version.startswith("0."):
            package.BuildConfig = Recorder
        else:
            llmapi.CudaGraphConfig = Recorder
        package.llmapi = llmapi
        monkeypatch.setitem(sys.modules, "tensorrt_llm", package)
        monkeypatch.setitem(sys.modules, "tensorrt_llm.llmapi", llmapi)
        return calls

    return install


def _job(model="llama-2layer", **fields):
    spec = dict(model=model, workflow="tensorrt_llm", precision="fp32", batch_size=2, input_len=8, output_len=32,
                device="cpu", warmup=0, repeats=1)
    return JobSpec(**{**spec, **fields})


@pytest.mark.parametrize("version", ["0.18.2", "1.1.0"])
def test_llm_api_settings_fixed_length_and_tokens(fake_trtllm, tmp_path, version):
    calls = fake_trtllm(version)
    result = run_job(_job(), tmp_path)
    assert result.status == "ok", result.error
    (options,) = calls["llm"]
    assert options["skip_tokenizer_init"] is True and options["dtype"] == "float32"
    assert options["model"].startswith(str(tmp_path / "tensorrt_llm" / "hf"))
    assert options["kv_cache_config"].kwargs == {"free_gpu_memory_fraction": 0.5}
    if version == "0.18.2":
        assert options["build_config"].kwargs == {"max_batch_size": 2, "max_input_len": 8, "max_seq_len": 40}
        assert "cuda_graph_config" not in options
    else:
        assert options["cuda_graph_config"].kwargs == {"batch_sizes": [1, 2, 4, 16, 64]}
        assert "build_config" not in options
    # every call asks for its exact length with EOS ignored: 32 tokens, or 1 for the prefill timed as the calls are
    lengths = [params.pop("max_tokens") for params in calls["sampling"]]
    assert all(params == {"ignore_eos": True, "end_id": 2, "pad_id": 2} for params in calls["sampling"])
    assert set(lengths) == {32, 1} and lengths[0] == 32  # the first call, the check, is a whole one
    assert result.metrics.output_tokens == 32
    assert result.correctness.passed and result.correctness.token_agreement == 1.0
    assert result.correctness.rel_l2_error is None  # tokens only: no logits to compare
    assert result.correctness.method == "greedy_prefix" and "TensorRT-LLM" in result.correctness.note
    assert result.metrics.settings["tensorrt_llm"] == version
    gc.collect()
    assert calls["shutdown"] == 1


def test_saved_model_folder_is_reused(fake_trtllm, tmp_path):
    calls = fake_trtllm("1.1.0")
    run_job(_job(), tmp_path)
    run_job(_job(batch_size=1), tmp_path)
    first, second = calls["llm"]
    assert first["model"] == second["model"]
    assert not list((tmp_path / "tensorrt_llm" / "hf").glob("*.partial"))


def test_model_path_is_used_as_is(fake_trtllm, tmp_path):
    from mlcbench.schema import MODELS
    from mlcbench.workers.models import llm
    from mlcbench.workers.interface import WorkflowContext
    from mlcbench.workers.workflows.tensorrt_llm import TensorRTLLM

    calls = fake_trtllm("1.1.0")
    job = _job()
    model = llm.build(MODELS[job.model], job, torch.float32, torch.device("cpu"))
    checkpoint = tmp_path / "checkpoint"
    model.save_pretrained(checkpoint)
    ctx = WorkflowContext(job=_job(model_path=str(checkpoint)), device=torch.device("cpu"), dtype=torch.float32,
                          cache_dir=tmp_path / "cache")
    TensorRTLLM().prepare_llm(model, ctx)
    assert calls["llm"][0]["model"] == str(checkpoint)
    assert not (tmp_path / "cache" / "hf").exists()  # nothing saved when a checkpoint is given


def test_synthetic_models_are_unsupported(fake_trtllm, tmp_path):
    fake_trtllm("1.1.0")
    result = run_job(_job(model="ffn-small"), tmp_path)
    assert result.status == "unsupported" and "LLMs only" in result.reason


def test_missing_tensorrt_llm_is_unsupported(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "tensorrt_llm", None)
    result = run_job(_job(), tmp_path)
    assert result.status == "unsupported"
    assert "tensorrt_llm not importable" in result.reason


def test_tokens_only_comparison_needs_every_step_before_eagers_first_near_tie():
    from mlcbench.workers.interface import Generation
    from mlcbench.workers.measurement.correctness import compare_greedy_tokens

    # eager's logits: rows 0 and 1 clear at steps 0 and 1; row 0 at a near-tie at step 2 (margin 1e-4, within the
    # fp32 noise of 1e-3 x its largest logit, twice), row 1 clear there too
    logits = torch.zeros(2, 3, 11, dtype=torch.float64)
    for row, tokens in enumerate([[5, 6, 7], [8, 9, 10]]):
        for step, token in enumerate(tokens):
            logits[row, step, token] = 1.0
    logits[0, 2, 0] = 1.0 - 1e-4
    reference = Generation(torch.tensor([[5, 6, 7], [8, 9, 10]]), logits)

    def check(tokens):
        return compare_greedy_tokens(torch.tensor(tokens), reference, torch.float32, None, "no hook")
    near_tie = check([[5, 6, 0], [8, 9, 10]])
    assert near_tie.passed and near_tie.token_agreement == pytest.approx(5 / 6)
    assert near_tie.method == "greedy_prefix" and "no hook" in near_tie.note and near_tie.free_running_tokens == 5
    assert not check([[5, 6, 7], [1, 9, 10]]).passed
    second_step = check([[5, 0, 7], [8, 9, 10]])  # the first token right, a later certain one not
    assert not second_step.passed and "row 0, step 1" in second_step.note
    assert not check([[8, 9, 10], [8, 9, 1]]).passed
    assert not compare_greedy_tokens(reference.tokens[:, :2], reference, torch.float32, None, "no hook").passed


def test_a_loop_wrong_after_its_first_token_fails_the_tokens_only_check(fake_trtllm, tmp_path):
    """The stand-in TensorRT-LLM right at the first token of every row, one more than eager's at the second."""
    fake_trtllm("1.1.0")
    package = sys.modules["tensorrt_llm"]
    generate = package.LLM.generate

    def wrong_second_token(self, prompts, params, use_tqdm=True):
        outputs = generate(self, prompts, params, use_tqdm)
        for output in outputs:
            ids = output.outputs[0].token_ids
            if len(ids) > 1:
                ids[1] = (ids[1] + 1) % 512  # llama-2layer's vocabulary
        return outputs
    package.LLM.generate = wrong_second_token
    result = run_job(_job(), tmp_path)
    assert result.status == "ok", result.error
    assert not result.correctness.passed and "step 1" in result.correctness.note
