"""The teacher-forced check against bugs planted in the decode loop's code (workers/decode/static_llama.py, run
uncompiled: Inductor on this CPU takes ~90 s a shape; test_teacher_forcing.py runs the compiled graphs on the same
loop): each must fail it in fp32 and bf16, at batch 1, 2 and 16, while the loop without a bug passes. Each bug is in
the decode step only (the prefill stays right: the check must see the decode step), on a tiny Llama built as every
sweep builds it: its q/k projections scaled up (models/llm.py, peaked_attention), since at Llama's initialisation
attention over random weights is near-uniform and a position error barely changes the logits (a RoPE off by one moved
them 0.3 % in fp32, below bf16's own rounding)."""

import functools

import pytest
import torch

from mlcbench.schema import JobSpec
from mlcbench.schema.hf_config import llm_from_hf_config
from mlcbench.workers.decode.compiled_step import CompiledStepRunner, decode_step, prefill
from mlcbench.workers.decode.hf_generate import HFGenerateRunner
from mlcbench.workers.decode.static_llama import StaticLlama, cached_attention, rotate
from mlcbench.workers.interface import Generation, WorkflowContext
from mlcbench.workers.measurement.correctness import GOLD_MULTIPLIER, compare_teacher_forced
from mlcbench.workers.measurement.llm import _fp32_logits
from mlcbench.workers.models import llm as llm_models
from mlcbench.workers.runner import run_job

OUTPUT_LEN = 8
TINY = llm_from_hf_config({
    "model_type": "llama", "hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512, "max_position_embeddings": 128,
    "rms_norm_eps": 1e-5, "bos_token_id": 1, "eos_token_id": 2, "tie_word_embeddings": False}, "fp32")
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def tiny_job(precision: str, batch: int, workflow: str = "torch_compile_decode") -> JobSpec:
    return JobSpec(model="tiny-llama", model_info=TINY, workflow=workflow, precision=precision, batch_size=batch,
                   input_len=16, output_len=OUTPUT_LEN, device="cpu", warmup=0, repeats=1)


@functools.lru_cache(maxsize=None)
def eager(precision: str, batch: int):
    """The model, its prompt, eager's teacher-forcing reference and (half precision) eager's logits in fp32."""
    job, dtype = tiny_job(precision, batch), DTYPES[precision]
    model = llm_models.build(TINY, job, dtype, torch.device("cpu"))
    prompt = llm_models.prompt_ids(TINY, job, torch.device("cpu"))
    with torch.no_grad():
        reference = HFGenerateRunner(model, disable_compile=True).generate(prompt, OUTPUT_LEN, with_logits=True)
        ctx = WorkflowContext(job=job, device=torch.device("cpu"), dtype=dtype, cache_dir=None)
        gold = _fp32_logits(model, prompt, reference, ctx, notes={})
    return model, prompt, reference, gold


# ---- the bugs: each takes the StaticLlama's pieces and plants itself in its one-token (decode) steps ----

def _decode_only(module: StaticLlama, **changes):
    """module.forward with each named attribute changed (a function of its value) in its one-token calls."""
    forward = module.forward

    def planted(ids, positions):
        if ids.shape[1] > 1:
            return forward(ids, positions)
        kept = {name: getattr(module, name) for name in changes}
        for name, change in changes.items():
            setattr(module, name, change(kept[name]))
        try:
            return forward(ids, positions)
        finally:
            for name, value in kept.items():
                setattr(module, name, value)
    module.forward = planted


def rope_one_position_off(module):
    # position p rotated as p - 1
    _decode_only(module, cos=lambda table: table.roll(1, 0), sin=lambda table: table.roll(1, 0))


def wrong_final_norm_eps(module):
    # 1e-4 for the config's 1e-5
    _decode_only(module, eps=lambda eps: 10 * eps)


def last_layer_skipped(module):
    _decode_only(module, layers=lambda layers: layers[:-1])


def _last_row_write_lost(q, k, v, cos, sin, k_cache, v_cache, positions, scale):
    kept = k_cache[-1].clone(), v_cache[-1].clone()
    out = cached_attention(q, k, v, cos, sin, k_cache, v_cache, positions, scale)
    k_cache[-1].copy_(kept[0])
    v_cache[-1].copy_(kept[1])
    return out


def _write_lost(q, k, v, cos, sin, k_cache, v_cache, positions, scale):
    return cached_attention(q, k, v, cos, sin, k_cache.clone(), v_cache.clone(), positions, scale)


def _cache_at_position_minus_one(q, k, v, cos, sin, k_cache, v_cache, positions, scale):
    return cached_attention(q, k, v, cos, sin, k_cache, v_cache, positions - 1, scale)


def _one_position_too_few(q, k, v, cos, sin, k_cache, v_cache, positions, scale):
    """Writes its entry at p, then attends over the positions before p only."""
    cached_attention(q, k, v, cos, sin, k_cache, v_cache, positions, scale)
    batch, kv_heads, _, head_dim = k_cache.shape
    heads = q.shape[-1] // head_dim
    query = rotate(q.view(batch, 1, heads, head_dim), cos, sin).transpose(1, 2)
    seen = int(positions[0])
    keys = k_cache[:, :, :seen].repeat_interleave(heads // kv_heads, dim=1)
    values = v_cache[:, :, :seen].repeat_interleave(heads // kv_heads, dim=1)
    out = torch.nn.functional.scaled_dot_product_attention(query, keys, values, scale=scale)
    return out.transpose(1, 2).reshape(batch, 1, heads * head_dim)


def _attention(kernel):
    def plant(module):
        for layer in module.layers:
            layer.attention_kernel = kernel
    return plant


BUGS = {
    "rope_one_position_off": rope_one_position_off,
    "one_row_kv_write": _attention(_last_row_write_lost),  # the last row's entry lost (at batch 1: the only row)
    "wrong_final_norm_eps": wrong_final_norm_eps,
    "kv_write_missing": _attention(_write_lost),
    "cache_at_position_minus_one": _attention(_cache_at_position_minus_one),
    "one_position_too_few": _attention(_one_position_too_few),
    "last_layer_skipped": last_layer_skipped,
}


def forced_run(precision: str, batch: int, bug=None) -> tuple[Generation, Generation, object]:
    model, prompt, reference, gold = eager(precision, batch)
    module = StaticLlama(model)
    if bug is not None:
        bug(module)
    runner = CompiledStepRunner(module, [model.config.eos_token_id], "default")
    runner.prefill, runner.step = prefill, decode_step
    with torch.no_grad():
        output = runner.generate(prompt, OUTPUT_LEN, with_logits=True, forced_tokens=reference.tokens)
    return output, reference, gold


@pytest.mark.parametrize("batch", [1, 2, 16])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_decode_loop_without_a_bug_passes(precision, batch):
    output, reference, gold = forced_run(precision, batch)
    check = compare_teacher_forced(output, reference, DTYPES[precision], gold)
    assert check.passed and check.tokens_beyond_noise == 0 and check.steps_checked == OUTPUT_LEN
    if precision == "bf16":  # anchored on eager's own error, with room to spare
        assert check.rel_l2_error < 0.75 * check.tolerance and "fp32" in check.note


@pytest.mark.parametrize("batch", [1, 2, 16])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("bug", sorted(BUGS))
def test_a_planted_decode_bug_fails_the_check(bug, precision, batch):
    output, reference, gold = forced_run(precision, batch, BUGS[bug])
    check = compare_teacher_forced(output, reference, DTYPES[precision], gold)
    assert not check.passed
    # its logits beyond the row's tolerance, in a decode step (not the prefill)
    assert check.rel_l2_error > check.tolerance and check.worst_step > 0
    if bug == "one_row_kv_write":
        assert check.worst_row == batch - 1  # the row it is confined to decides


def test_a_bug_confined_to_one_row_fails_at_b16_where_pooling_the_rows_would_pass_it():
    output, reference, gold = forced_run("bf16", 16, BUGS["one_row_kv_write"])
    check = compare_teacher_forced(output, reference, torch.bfloat16, gold)
    pooled = ((output.step_logits.double() - reference.step_logits.double()).norm()
              / reference.step_logits.double().norm()).item()
    assert not check.passed and pooled < 0.06  # the fixed bf16 tolerance of a check pooled over rows passed it


# ---- the token check, on logits written out ----

def _check(chosen, ref_logits, expected, gold=None, dtype=torch.float32):
    output = Generation(tokens=torch.tensor(chosen), step_logits=ref_logits)
    # eager's own logits, as from a workflow that declares it runs eager's kernels (else bit-identical logits fail)
    return compare_teacher_forced(output, Generation(tokens=torch.tensor(expected), step_logits=ref_logits), dtype,
                                  gold, runs_eager_kernels=True)


def test_a_differing_token_passes_only_within_eagers_own_noise_there():
    """The workflow's logits are eager's (no logit error at all), so only its token choice can fail it."""
    ref = torch.tensor([[[3.0, 2.0, 1.0, 0.0]], [[0.0, 1.0, 2.8, 2.9]]], dtype=torch.float64)  # batch 2, 1 step
    # without an fp32 reference: the noise at a row is its tolerance (1e-3 in fp32) times its largest logit
    assert _check([[0], [3]], ref, [[0], [3]]).passed
    beyond = _check([[0], [2]], ref, [[0], [3]])  # eager's margin 0.1, far beyond 2 x 1e-3 x 2.9
    assert not beyond.passed and beyond.tokens_beyond_noise == 1 and beyond.token_agreement_within_noise == 0.5
    assert beyond.worst_token_margin == pytest.approx(0.1 / (2 * 1e-3 * 2.9))
    assert beyond.rel_l2_error == 0.0  # the logits alone would have passed it
    # with one: eager's largest logit error against fp32 at that row and step, times GOLD_MULTIPLIER, twice
    gold = ref.clone()
    gold[1, 0, 0] += 0.03  # eager 0.03 from fp32 in row 1: a margin up to 2 x GOLD_MULTIPLIER x 0.03 is noise
    within = _check([[0], [2]], ref, [[0], [3]], gold, torch.bfloat16)
    assert within.passed and within.tokens_beyond_noise == 0 and within.token_agreement_within_noise == 1.0
    assert within.token_agreement == 0.5  # raw: one of its two choices is not eager's
    assert within.worst_token_margin == pytest.approx(0.1 / (2 * GOLD_MULTIPLIER * 0.03))
    gold[1, 0, 0] = 0.02  # eager 0.02 from fp32 there: 0.1 > 2 x 2 x 0.02
    assert not _check([[0], [2]], ref, [[0], [3]], gold, torch.bfloat16).passed


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_a_loop_that_samples_fails_on_its_tokens_alone(precision):
    """Fed eager's tokens, a sampling loop's logits are eager's own; its draws differ beyond noise."""
    output, reference, gold = forced_run(precision, 16)
    generator = torch.Generator().manual_seed(0)
    draws = torch.multinomial(output.step_logits.float().flatten(0, 1).softmax(-1), 1, generator=generator)
    sampled = Generation(tokens=draws.view(16, OUTPUT_LEN), step_logits=output.step_logits)
    check = compare_teacher_forced(sampled, reference, DTYPES[precision], gold)
    assert check.rel_l2_error <= check.tolerance and not check.passed
    assert check.tokens_beyond_noise > 0 and check.worst_token_margin > 1


# ---- a call after the timed ones is checked too ----

def _tables_shifted_on_every_reuse(monkeypatch):
    """A loop whose reuse of its cache (any call after the first of a shape) rotates RoPE one position further."""
    generate = CompiledStepRunner.generate

    def planted(self, input_ids, *args, **kwargs):
        if self.model.batch == input_ids.shape[0]:
            self.model.cos, self.model.sin = self.model.cos.roll(1, 0), self.model.sin.roll(1, 0)
        return generate(self, input_ids, *args, **kwargs)
    monkeypatch.setattr(CompiledStepRunner, "generate", planted)


@pytest.mark.parametrize("reuse_bug", [False, True])
def test_a_bug_that_shows_only_on_a_reused_cache_fails_the_process(tmp_path, monkeypatch, reuse_bug):
    from mlcbench.workers.decode import compiled_step

    monkeypatch.setattr(compiled_step, "compile_for_warm_start", lambda function, **options: function)
    if reuse_bug:
        _tables_shifted_on_every_reuse(monkeypatch)
    result = run_job(tiny_job("fp32", 2), tmp_path)
    assert result.status == "ok", result.error
    check = result.correctness
    assert check.calls_checked == 2 and result.metrics.latency.processes[0].correctness == check
    assert check.passed is not reuse_bug


@pytest.mark.parametrize("workflow", ["torch_compile_static", "torch_compile_decode"])
def test_a_compiled_workflow_without_a_bug_passes_in_bf16(tmp_path, workflow):
    """Inductor's own kernels against eager, in bf16, on both calls a process checks (in a process of its own, as a
    worker runs it: dynamo's code cache of other tests' shapes stays out)."""
    from tests.workers.test_compiled_decode import in_a_fresh_process

    [result] = in_a_fresh_process([tiny_job("bf16", 2, workflow)], tmp_path)
    assert result.status == "ok", result.error
    check = result.correctness
    assert check.passed and check.calls_checked == 2 and check.tokens_beyond_noise == 0
    assert result.metrics.applied.compiled_graphs >= 1 and "fp32" in check.note


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_eagers_own_logits_fail_the_check_unless_the_workflow_runs_eagers_kernels(precision):
    _, _, reference, gold = eager(precision, 2)
    handed_back = compare_teacher_forced(reference, reference, DTYPES[precision], gold)
    assert not handed_back.passed and handed_back.identical_to_reference and handed_back.max_abs_diff == 0.0
    declared = compare_teacher_forced(reference, reference, DTYPES[precision], gold, runs_eager_kernels=True)
    assert declared.passed and not declared.identical_to_reference
    output, _, _ = forced_run(precision, 2)  # the loop's own kernels: never bit for bit eager's
    assert not compare_teacher_forced(output, reference, DTYPES[precision], gold).identical_to_reference
