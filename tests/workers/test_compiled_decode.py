"""torch_compile_decode on the CPU (no CUDA graphs there; the same compiled graphs otherwise), Inductor's cache
folders, and warm starts from dynamo's precompile cache (this workflow's and torch_compile_static's)."""

import functools
import subprocess
import sys

import pytest
import torch

from mlcbench.schema import MODELS, JobSpec, Result
from mlcbench.workers.decode import compiled_step
from mlcbench.workers.decode.compiled_step import (CompiledStepRunner, compile_options, decode_step, pdl_unavailable,
                                                   prefill)
from mlcbench.workers.decode.hf_generate import HFGenerateRunner
from mlcbench.workers.decode.static_llama import StaticLlama, Unfit, cached_attention, one_row_projection
from mlcbench.workers.measurement.dynamo_stats import compile_cache_state
from mlcbench.workers.models import llm as llm_models
from mlcbench.workers.runner import run_job
from mlcbench.workers.stacks.inductor_cache import cache_key, job_shape, use_cache_folder


def job(**overrides) -> JobSpec:
    return JobSpec(**{"model": "llama-2layer", "workflow": "torch_compile_decode", "precision": "fp32",
                      "batch_size": 2, "output_len": 6, "device": "cpu", "warmup": 1, "repeats": 2, **overrides})


def hf_model(**config_overrides):
    info = MODELS["llama-2layer"]
    if config_overrides:
        info = info.model_copy(update=config_overrides)
    return llm_models.build(info, job(), torch.float32, torch.device("cpu"))


def plain(model: StaticLlama, eos: list[int]) -> CompiledStepRunner:
    """The runner with its step functions left uncompiled: the model's math on its own."""
    runner = CompiledStepRunner(model, eos, "default")
    runner.prefill, runner.step = prefill, decode_step
    return runner


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("prompt_len,batch", [(32, 2), (5, 1)])
@torch.no_grad()
def test_static_llama_reproduces_hf_logits_and_tokens_with_grouped_kv_heads(prompt_len, batch, fused):
    model = hf_model()
    assert model.config.num_key_value_heads < model.config.num_attention_heads
    prompt = torch.randint(3, 32000, (batch, prompt_len), generator=torch.Generator().manual_seed(7))
    reference = HFGenerateRunner(model, disable_compile=True).generate(prompt, 7, with_logits=True)
    out = plain(StaticLlama(model, fuse_projections=fused), [2]).generate(prompt, 7, with_logits=True)
    assert torch.equal(out.tokens, reference.tokens)
    torch.testing.assert_close(out.step_logits, reference.step_logits, rtol=1e-4, atol=1e-4)


@torch.no_grad()
def test_static_llama_shares_the_hf_weights_and_never_emits_eos():
    model = hf_model()
    static = StaticLlama(model)
    block, layer = static.layers[0], model.model.layers[0]
    assert layer.self_attn.k_proj.weight.untyped_storage().data_ptr() == block.wqkv.untyped_storage().data_ptr()
    assert layer.mlp.up_proj.weight.untyped_storage().data_ptr() == block.w13.untyped_storage().data_ptr()
    prompt = torch.tensor([[5, 6, 7]])
    favourite = plain(static, []).generate(prompt, 4).tokens[0, 0].item()
    # the token greedy picks first, declared EOS: the runner (like generate's min_new_tokens) must never emit it
    out = plain(static, [favourite]).generate(prompt, 4)
    assert out.tokens.shape == (1, 4) and not (out.tokens == favourite).any()


@torch.no_grad()
def test_unfused_projections_are_the_hf_weights_themselves_one_gemm_each():
    model = hf_model()
    layer = model.model.layers[0]
    before = layer.self_attn.q_proj.weight.data_ptr(), layer.mlp.gate_proj.weight.data_ptr()
    block = StaticLlama(model, fuse_projections=False).layers[0]
    assert (block.wq.data_ptr(), block.w1.data_ptr()) == before  # no copy, and the HF weights were left as they were
    assert block.wv.data_ptr() == layer.self_attn.v_proj.weight.data_ptr()
    assert not hasattr(block, "wqkv") and not hasattr(block, "w13")


@torch.no_grad()
def test_one_row_steps_run_every_projection_through_the_row_kernel_with_its_norm_activation_and_residual():
    model = hf_model()
    calls = []

    def recording_kernel(x, weight, **fusions):
        calls.append((tuple(weight.shape), tuple(sorted(fusions))))
        return one_row_projection(x, weight, **fusions)

    prompt = torch.randint(3, 32000, (1, 5), generator=torch.Generator().manual_seed(3))
    reference = plain(StaticLlama(model), [2]).generate(prompt, 3, with_logits=True)
    out = plain(StaticLlama(model, row_kernel=recording_kernel), [2]).generate(prompt, 3, with_logits=True)
    # the same ops in the same order as the model's own path: the very same logits
    torch.testing.assert_close(out.step_logits, reference.step_logits, rtol=0, atol=0)
    config = model.config
    q_size = config.num_attention_heads * (config.hidden_size // config.num_attention_heads)
    kv_size = config.num_key_value_heads * (config.hidden_size // config.num_attention_heads)
    hidden, inter = config.hidden_size, config.intermediate_size
    layer = [((q_size + 2 * kv_size, hidden), ("eps", "norm")), ((hidden, q_size), ("residual",)),
             ((2 * inter, hidden), ("eps", "norm")), ((hidden, inter), ("glu", "residual"))]
    head = [((config.vocab_size, hidden), ("eps", "norm"))]
    # the 5-token prefill runs the model's own path up to its one last row's LM head; then the two one-row steps
    assert calls == head + (layer * config.num_hidden_layers + head) * 2


@torch.no_grad()
def test_one_token_steps_of_several_rows_run_every_projection_and_the_lm_head_through_the_gemm_kernel():
    model = hf_model()
    calls = []

    def recording_kernel(x, weight):
        calls.append((x.shape[:-1], tuple(weight.shape)))
        return torch.nn.functional.linear(x, weight)

    prompt = torch.randint(3, 32000, (2, 5), generator=torch.Generator().manual_seed(5))
    reference = plain(StaticLlama(model), [2]).generate(prompt, 3, with_logits=True)
    out = plain(StaticLlama(model, gemm_kernel=recording_kernel), [2]).generate(prompt, 3, with_logits=True)
    torch.testing.assert_close(out.step_logits, reference.step_logits, rtol=0, atol=0)
    config = model.config
    head_dim = config.hidden_size // config.num_attention_heads
    q_size, kv_size = config.num_attention_heads * head_dim, config.num_key_value_heads * head_dim
    hidden, inter = config.hidden_size, config.intermediate_size
    layer = [(q_size + 2 * kv_size, hidden), (hidden, q_size), (2 * inter, hidden), (hidden, inter)]
    # the 5-token prefill runs cuBLAS's F.linear throughout; each of the two one-token steps, every projection of
    # both rows and then the LM head
    step = [((2, 1), shape) for shape in layer] * config.num_hidden_layers + [((2,), (config.vocab_size, hidden))]
    assert calls == step * 2


def test_a_row_kernel_needs_fused_projections_without_biases():
    with pytest.raises(Unfit, match="fuse_projections=False"):
        StaticLlama(hf_model(), fuse_projections=False, row_kernel=one_row_projection)
    biased = hf_model()
    q_proj = biased.model.layers[1].self_attn.q_proj
    q_proj.bias = torch.nn.Parameter(torch.zeros(q_proj.out_features))
    with pytest.raises(Unfit, match="biases"):
        StaticLlama(biased, row_kernel=one_row_projection)


@torch.no_grad()
def test_one_token_steps_run_each_layers_attention_through_the_attention_kernel_with_its_own_cache():
    model = hf_model()
    calls = []

    def recording_kernel(q, k, v, cos, sin, k_cache, v_cache, positions, scale):
        calls.append((q.shape[1], k_cache.data_ptr(), positions.tolist()))
        return cached_attention(q, k, v, cos, sin, k_cache, v_cache, positions, scale)

    prompt = torch.randint(3, 32000, (2, 5), generator=torch.Generator().manual_seed(4))
    reference = plain(StaticLlama(model), [2]).generate(prompt, 4, with_logits=True)
    static = StaticLlama(model, attention_kernel=recording_kernel)
    out = plain(static, [2]).generate(prompt, 4, with_logits=True)
    # the kernel wrote each step's k and v where the next step reads them: the very same logits at every step
    torch.testing.assert_close(out.step_logits, reference.step_logits, rtol=0, atol=0)
    caches = [layer.k_cache.data_ptr() for layer in static.layers]
    # the 5-token prefill attends in the model's own ops; each of the three one-token steps calls it once a layer
    assert calls == [(1, cache, [position]) for position in (5, 6, 7) for cache in caches]


@pytest.mark.parametrize("option", ["triton_gemv", "triton_attention", "prefill_graph", "triton_gemm"])
def test_the_triton_kernels_and_the_prefill_graph_are_refused_off_a_cuda_gpu(tmp_path, option):
    workflow = "handtuned_decode" if option.startswith("triton_") else "torch_compile_decode"
    refused = run_job(job(workflow=workflow, options={option: True}), tmp_path)
    assert refused.status == "unsupported" and option in refused.reason and "cpu" in refused.reason


@pytest.mark.parametrize("prefill_graph", [True, False])
def test_the_prefill_is_compiled_for_cuda_graphs_only_with_prefill_graph(monkeypatch, prefill_graph):
    compiled = {}

    def record(fn, **kwargs):
        compiled[fn.__name__] = kwargs["options"]
        return fn

    monkeypatch.setattr(compiled_step, "compile_for_warm_start", record)
    CompiledStepRunner(StaticLlama(hf_model()), [2], "reduce-overhead", prefill_graph=prefill_graph)
    assert compiled["decode_step"]["triton.cudagraphs"] is True
    assert compiled["prefill"].get("triton.cudagraphs", False) is prefill_graph
    assert compiled["prefill"]["coordinate_descent_tuning"] is True


def test_pdl_is_a_compile_option_of_the_decode_step_only_and_refused_where_inductor_would_drop_it(tmp_path,
                                                                                                   monkeypatch):
    assert compile_options("reduce-overhead", pdl=True)["triton.enable_pdl"] is True
    assert "triton.enable_pdl" not in compile_options("reduce-overhead")
    assert "CUDA" in pdl_unavailable(torch.device("cpu"))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 9))
    assert "9.0" in pdl_unavailable(torch.device("cuda"))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    assert pdl_unavailable(torch.device("cuda")) is None
    refused = run_job(job(options={"pdl": True}), tmp_path)
    assert refused.status == "unsupported" and "PDL" in refused.reason and "cpu" in refused.reason


def test_compiled_decode_agrees_with_eager_cold_then_warm_from_the_cache_folder(tmp_path):
    cold = run_job(job(warmup=0, repeats=1), tmp_path)
    assert cold.status == "ok", cold.error
    assert cold.correctness.passed and cold.correctness.token_agreement == 1.0
    assert cold.metrics.output_tokens == 6 and cold.metrics.graph_breaks == 0
    applied = cold.metrics.applied
    assert applied.decode_loop == "compiled_step" and applied.compile_mode == "default"
    assert applied.compiled_graphs == 2  # prefill and the decode step, each once
    assert cold.metrics.recompiles == 0
    assert cold.metrics.compile_cache == "cold"
    assert any((tmp_path / "torch_compile_decode" / "inductor").iterdir())

    assert cold.metrics.applied.compile_caches == ("inductor", "dynamo_precompile")
    assert cold.metrics.settings["dynamo_trace_s"] > 0

    # a later worker process: the same shape loads the traced step from dynamo's precompile cache (nothing is traced
    # again); another shape after that load traces again, in its own cache folder (in torch 2.13 a process whose
    # first trace follows a loaded package fails unless the package's globals are dropped first)
    warm, other_shape = in_a_fresh_process([job(warmup=0, repeats=1), job(warmup=0, repeats=1, batch_size=1)],
                                           tmp_path)
    assert warm.status == "ok" and warm.correctness.passed and warm.correctness.token_agreement == 1.0
    assert warm.metrics.compile_cache == "warm"
    assert warm.metrics.applied.compiled_graphs == 2 and "dynamo_trace_s" not in warm.metrics.settings
    assert other_shape.status == "ok", other_shape.error
    assert other_shape.metrics.compile_cache == "cold" and other_shape.correctness.passed
    assert run_job(job(warmup=0, repeats=1, batch_size=1), tmp_path).metrics.compile_cache == "warm"


def test_hf_static_recipe_loads_its_compiled_forward_warm_in_a_fresh_process(tmp_path):
    static = functools.partial(job, workflow="torch_compile_static", warmup=0, repeats=1)
    cold = run_job(static(), tmp_path)
    assert cold.status == "ok", cold.error
    assert cold.metrics.compile_cache == "cold" and cold.metrics.settings["dynamo_trace_s"] > 0
    assert cold.metrics.applied.compile_caches == ("inductor", "dynamo_precompile")

    # generate()'s own compiled call (torch.compile(self.__call__)) would be traced again here: its guards do not load
    warm, other_shape = in_a_fresh_process([static(), static(batch_size=1)], tmp_path)
    assert warm.status == "ok", warm.error
    assert warm.metrics.compile_cache == "warm" and warm.metrics.graph_breaks == 0
    assert warm.metrics.applied.compiled_graphs == 1 and "dynamo_trace_s" not in warm.metrics.settings
    assert warm.correctness.passed and warm.correctness.token_agreement == 1.0
    # the loaded graphs ask for the CUDA graphs of mode reduce-overhead as the cold compile's did (a CPU skips them,
    # and counts each skip): loaded without them, a GPU's warm process ran launch-bound, 3x slower
    cudagraph_skips = cold.metrics.settings.get("cudagraph_skips")
    assert cudagraph_skips and warm.metrics.settings.get("cudagraph_skips") == cudagraph_skips
    assert other_shape.status == "ok", other_shape.error
    assert other_shape.metrics.compile_cache == "cold" and other_shape.correctness.passed


def test_the_compiled_forward_loads_every_graph_warm_in_a_fresh_process_and_traces_nothing(tmp_path):
    """torch_compile_forward's warm processes found every graph in Inductor's caches and still traced the model in
    dynamo three times (prefill, first decode step, the dynamic-shape recompile): 20-30 s on an H200. Now they load
    the traced graphs from dynamo's precompile cache, as its counters say, stored with the process."""
    forward = functools.partial(job, workflow="torch_compile_forward", warmup=0, repeats=1)
    cold = run_job(forward(), tmp_path)
    assert cold.status == "ok", cold.error
    assert cold.metrics.compile_cache == "cold" and cold.metrics.applied.compiled_graphs == 3
    assert cold.metrics.cache_counts.fx_graph_misses == 3 and cold.metrics.cache_counts.dynamo_precompile_misses == 1
    assert cold.metrics.applied.compile_caches == ("inductor", "dynamo_precompile")

    warm, other_shape = in_a_fresh_process([forward(), forward(batch_size=1)], tmp_path)
    assert warm.status == "ok", warm.error
    assert warm.metrics.compile_cache == "warm", (warm.metrics.cache_counts, warm.metrics.settings)
    assert "dynamo_trace_s" not in warm.metrics.settings and warm.metrics.cache_counts.dynamo_precompile_hits == 1
    assert warm.metrics.cache_counts.fx_graph_misses == warm.metrics.cache_counts.dynamo_precompile_misses == 0
    assert warm.metrics.worker_processes()[0].cache_counts == warm.metrics.cache_counts
    assert warm.correctness.passed and warm.correctness.token_agreement == 1.0
    assert other_shape.status == "ok", other_shape.error
    assert other_shape.metrics.compile_cache == "cold" and other_shape.correctness.passed


def in_a_fresh_process(jobs: list[JobSpec], cache_dir) -> list[Result]:
    """run_job for each job, in order, in one new Python process (as a worker runs its jobs)."""
    script = ("import sys\n"
              "from pathlib import Path\n"
              "from mlcbench.schema import JobSpec\n"
              "from mlcbench.workers.runner import run_job\n"
              "for line in sys.stdin:\n"
              "    print(run_job(JobSpec.model_validate_json(line), Path(sys.argv[1])).model_dump_json())\n")
    done = subprocess.run([sys.executable, "-c", script, str(cache_dir)], capture_output=True, text=True, check=True,
                          input="".join(job.model_dump_json() + "\n" for job in jobs))
    return [Result.model_validate_json(line) for line in done.stdout.splitlines() if line.startswith("{")]


def test_a_precompile_shape_names_the_options_the_model_and_the_shape_a_job_compiles_with(monkeypatch):
    """A changed option, shape or model never loads another's compiled graphs: the guards kept do not check the
    config values a graph holds as constants, so a catalog row changed under its own name moves its folder too."""
    variants = {job_shape(job(options=options)) for options in
                ({}, {"pdl": True}, {"fused_projections": False}, {"compile_mode": "max-autotune"})}
    assert len(variants) == 4
    shapes = {job_shape(job(**fields)) for fields in
              ({}, {"batch_size": 1}, {"input_len": 31}, {"output_len": 7}, {"precision": "bf16"})}
    assert len(shapes) == 5
    before = job_shape(job())
    monkeypatch.setitem(MODELS, "llama-2layer", MODELS["llama-2layer"].model_copy(update={"tie_word_embeddings": True}))
    assert job_shape(job()) != before


def test_cache_key_names_interpreter_torch_triton_device_image_and_worker_code():
    base = dict(python="3.12.3", torch_version="2.11.0+cu130", triton_version="3.5.0",
                device="NVIDIA H100 80GB HBM3-sm90", image_digest=None, code="e1805f134876afb693213d16")
    key = cache_key(**base)
    assert "/" not in key and " " not in key
    for field, other in [("torch_version", "2.13.0+cu130"), ("python", "3.11.7"), ("triton_version", "3.6.0"),
                         ("device", "NVIDIA H200-sm90"), ("image_digest", "sha256:0123456789abcdef0123"),
                         ("code", "0e1805f134876afb693213d1")]:
        assert cache_key(**{**base, field: other}) != key, field


def test_cache_folder_follows_the_running_torch_version(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "before"))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "before"))
    first = use_cache_folder(tmp_path, torch.device("cpu"))
    monkeypatch.setattr(torch, "__version__", "99.0.0")
    second = use_cache_folder(tmp_path, torch.device("cpu"))
    assert first != second and first.parent == second.parent == tmp_path / "inductor"
    import os

    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(second)
    assert os.environ["TRITON_CACHE_DIR"].startswith(str(second))


@pytest.mark.parametrize("inductor,aot,state", [
    ({}, {}, None),
    ({"fxgraph_cache_miss": 1, "fxgraph_cache_hit": 3}, {}, "cold"),
    ({"fxgraph_cache_hit": 2}, {"autograd_cache_hit": 2}, "warm"),
    ({}, {"autograd_cache_hit": 2}, "warm"),
    ({}, {"autograd_cache_miss": 1}, "cold"),
])
def test_compile_cache_state_from_inductor_counters(inductor, aot, state):
    assert compile_cache_state(inductor, aot, {}) == state
