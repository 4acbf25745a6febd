"""Teacher-forced correctness: every LLM loop can be fed eager's greedy tokens, its logits are then compared with
eager's at every output step (0: prefill, then each decode step), and its own token choices with eager's. Bugs are
planted by monkeypatching (never in the product code) and must fail the check at batch 1 and 4; test_planted_bugs.py
plants more, in fp32 and bf16 at batch 1, 2 and 16."""

import pytest
import torch

from mlcbench.schema import MODELS, JobSpec
from mlcbench.workers.decode import compiled_step
from mlcbench.workers.decode.compiled_step import CompiledStepRunner, decode_step, prefill
from mlcbench.workers.decode.greedy import GreedyRunner, LogitsOnly
from mlcbench.workers.decode.hf_generate import HFGenerateRunner
from mlcbench.workers.decode.static_llama import Block, StaticLlama
from mlcbench.workers.interface import Generation
from mlcbench.workers.measurement.correctness import compare_teacher_forced
from mlcbench.workers.models import llm as llm_models
from mlcbench.workers.runner import run_job
from tests.workers.test_compiled_decode import in_a_fresh_process

OUTPUT_LEN = 6


def job(workflow: str = "torch_compile_decode", **overrides) -> JobSpec:
    return JobSpec(**{"model": "llama-2layer", "workflow": workflow, "precision": "fp32", "batch_size": 1,
                      "output_len": OUTPUT_LEN, "device": "cpu", "warmup": 0, "repeats": 1, **overrides})


def model_and_prompt(batch: int, dtype=torch.float32):
    spec = job(batch_size=batch)
    info = MODELS[spec.model]
    return (llm_models.build(info, spec, dtype, torch.device("cpu")),
            llm_models.prompt_ids(info, spec, torch.device("cpu")))


def plain(model: StaticLlama, eos: list[int]) -> CompiledStepRunner:
    runner = CompiledStepRunner(model, eos, "default")
    runner.prefill, runner.step = prefill, decode_step
    return runner


# ---- the bugs, each in the decode step only (the prefill stays right: the check must see the decode step) ----

def _attend_without_decode_writes(original):
    def attend(self, x, positions, cos, sin):
        if x.shape[1] > 1:
            return original(self, x, positions, cos, sin)
        caches = self.k_cache, self.v_cache
        self.k_cache, self.v_cache = caches[0].clone(), caches[1].clone()  # the step writes into copies, then lost
        try:
            return original(self, x, positions, cos, sin)
        finally:
            self.k_cache, self.v_cache = caches
    return attend


def _forward_with_rope_one_position_off(original):
    def forward(self, ids, positions):
        if ids.shape[1] > 1:
            return original(self, ids, positions)
        tables = self.cos, self.sin
        self.cos, self.sin = tables[0].roll(1, 0), tables[1].roll(1, 0)  # position p rotated as p - 1
        try:
            return original(self, ids, positions)
        finally:
            self.cos, self.sin = tables
    return forward


def _forward_skipping_the_last_layer(original):
    def forward(self, ids, positions):
        if ids.shape[1] > 1:
            return original(self, ids, positions)
        layers = self.layers
        self.layers = layers[:-1]
        try:
            return original(self, ids, positions)
        finally:
            self.layers = layers
    return forward


def _sampled(logits: torch.Tensor, eos_ids: torch.Tensor) -> torch.Tensor:
    """A draw from softmax(logits) (Gumbel-max) in place of the argmax."""
    logits = logits.float().index_fill(-1, eos_ids, float("-inf"))
    return (logits - torch.log(-torch.log(torch.rand_like(logits)))).argmax(dim=-1)


BUGS = {
    "kv_cache_never_updated": lambda mp: mp.setattr(Block, "attend", _attend_without_decode_writes(Block.attend)),
    "rope_one_position_off": lambda mp: mp.setattr(StaticLlama, "forward",
                                                   _forward_with_rope_one_position_off(StaticLlama.forward)),
    "one_layer_skipped": lambda mp: mp.setattr(StaticLlama, "forward",
                                               _forward_skipping_the_last_layer(StaticLlama.forward)),
    "sampling_instead_of_greedy": lambda mp: mp.setattr(compiled_step, "_greedy", _sampled),
}


@pytest.mark.parametrize("batch,options", [(1, {}), (4, {}), (4, {"fused_projections": False})])
def test_the_compiled_decode_loop_passes_every_step_fed_eagers_tokens(tmp_path, batch, options):
    # in a worker process of its own, as a sweep runs it: in this one, other tests' compiled decode steps of the same
    # shapes are still in dynamo's code cache (no worker resets dynamo between them)
    [result] = in_a_fresh_process([job(batch_size=batch, options=options)], tmp_path)
    assert result.status == "ok", result.error
    # the variant is named in the result, as the report's ablation reads it
    applied = result.metrics.applied
    assert (applied.fused_projections, applied.pdl) == (options.get("fused_projections", True), False)
    check = result.correctness
    assert check.passed and check.method == "teacher_forced" and check.steps_checked == OUTPUT_LEN
    assert check.token_agreement == 1.0 and check.rel_l2_error < 1e-5
    assert result.metrics.latency.processes[0].correctness == check  # the process's own check, for the host
    # the forced tokens ran the same compiled step as the timed calls: nothing compiled again
    assert result.metrics.recompiles == 0 and result.metrics.applied.compiled_graphs == 2


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("batch", [1, 4])
@pytest.mark.parametrize("bug", sorted(BUGS))
def test_a_planted_decode_bug_fails_the_check(tmp_path, monkeypatch, bug, batch, fused):
    """torch_compile_decode through the worker, its step functions left uncompiled (Inductor on this CPU takes ~90 s
    a shape; the test above runs the compiled graphs on the same loop): the planted bug is in the code they trace."""
    monkeypatch.setattr(compiled_step, "compile_for_warm_start", lambda function, **options: function)
    BUGS[bug](monkeypatch)
    result = run_job(job(batch_size=batch, options={"fused_projections": fused}), tmp_path)
    assert result.status == "ok", result.error
    check = result.correctness
    assert check.method == "teacher_forced" and check.steps_checked == OUTPUT_LEN
    assert not check.passed and result.reason == "correctness check failed against eager"
    assert result.metrics.latency.processes[0].correctness == check
    if bug == "sampling_instead_of_greedy":  # fed eager's tokens, its logits are eager's: its choices give it away
        assert check.rel_l2_error < 1e-5 and check.token_agreement < 1.0
    else:
        assert check.worst_step > 0 and check.rel_l2_error > check.tolerance  # a decode step, not the prefill


def _static_cache_without_decode_writes(monkeypatch):
    from transformers.cache_utils import StaticLayer

    original = StaticLayer.update

    def update(self, key_states, value_states, *args, **kwargs):
        if key_states.shape[-2] > 1 or not self.is_initialized:
            return original(self, key_states, value_states, *args, **kwargs)
        self.cumulative_length.add_(key_states.shape[-2])  # the position moves on, nothing is written
        return self.keys, self.values

    monkeypatch.setattr(StaticLayer, "update", update)


@pytest.mark.parametrize("batch", [1, 4])
def test_a_static_cache_that_skips_its_decode_update_fails_torch_compile_static(tmp_path, monkeypatch, batch):
    _static_cache_without_decode_writes(monkeypatch)
    result = run_job(job("torch_compile_static", batch_size=batch), tmp_path)
    assert result.status == "ok", result.error
    assert result.metrics.applied.compiled_graphs >= 1  # the compiled forward ran the planted cache
    check = result.correctness
    assert check.method == "teacher_forced" and check.steps_checked == OUTPUT_LEN
    assert not check.passed and check.worst_step > 0 and check.rel_l2_error > check.tolerance


@torch.no_grad()
def test_a_decode_step_that_never_writes_its_cache_fails_in_bf16_at_batch_1(monkeypatch):
    """The issue's case: bf16 (tolerance 6 %), batch 1, uncompiled. Compared only while the greedy tokens agreed,
    this bug passed (rel L2 0.0455)."""
    model, prompt = model_and_prompt(1, torch.bfloat16)
    reference = HFGenerateRunner(model, disable_compile=True).generate(prompt, 16, with_logits=True)
    monkeypatch.setattr(Block, "attend", _attend_without_decode_writes(Block.attend))
    forced = plain(StaticLlama(model), [model.config.eos_token_id]).generate(
        prompt, 16, with_logits=True, forced_tokens=reference.tokens)
    check = compare_teacher_forced(forced, reference, torch.bfloat16)
    assert not check.passed and check.steps_checked == 16 and check.worst_step > 0


@pytest.mark.parametrize("batch", [1, 4])
@torch.no_grad()
def test_every_loop_fed_the_same_tokens_gives_the_logits_of_one_forward_over_them(batch):
    """Forced tokens that are not the greedy ones: each loop's step k must see exactly prompt + tokens[:k]."""
    model, prompt = model_and_prompt(batch)
    eos = model.config.eos_token_id
    forced = torch.randint(3, 32000, (batch, OUTPUT_LEN), generator=torch.Generator().manual_seed(3))
    whole = model(input_ids=torch.cat([prompt, forced], dim=1)).logits
    expected = whole[:, prompt.shape[1] - 1:-1].float()  # the logits each of the output steps is chosen from
    loops = {"hf_generate": HFGenerateRunner(model, disable_compile=True),
             "greedy_no_kv_cache": GreedyRunner(LogitsOnly(model), eos_token_id=eos),
             "compiled_step": plain(StaticLlama(model), [eos]),
             "compiled_step unfused": plain(StaticLlama(model, fuse_projections=False), [eos])}
    for name, loop in loops.items():
        out = loop.generate(prompt, OUTPUT_LEN, with_logits=True, forced_tokens=forced)
        torch.testing.assert_close(out.step_logits, expected, rtol=1e-4, atol=1e-4, msg=name)
        # its own choices, not the forced tokens: the argmax of its logits, EOS excluded
        assert torch.equal(out.tokens, expected.index_fill(-1, torch.tensor([eos]), float("-inf")).argmax(-1)), name


# ---- the tolerance against an fp32 reference (a deep half-precision model is itself that far from exact) ----

def test_a_rows_tolerance_is_twice_eagers_own_error_against_fp32_in_that_row_never_below_the_floor():
    torch.manual_seed(0)
    gold = torch.randn(2, 3, 50, dtype=torch.float64)
    # eager: row 1 four times as far from fp32 as row 0
    noise = torch.randn_like(gold) * torch.tensor([0.01, 0.04], dtype=torch.float64)[:, None, None]
    reference = Generation(tokens=gold.argmax(-1), step_logits=gold + noise * gold.norm(dim=(1, 2), keepdim=True) / 12)
    eager_error = [((reference.step_logits[row] - gold[row]).norm() / gold[row].norm()).item() for row in range(2)]
    # the workflow: as far again from eager as eager is from fp32 (row 1: 1.5 times), in another direction (same
    # greedy tokens)
    apart = torch.tensor([1.0, 1.5], dtype=torch.float64)[:, None, None]
    output = Generation(tokens=reference.tokens,
                        step_logits=reference.step_logits + apart * (reference.step_logits - gold))
    fixed = compare_teacher_forced(output, reference, torch.bfloat16)
    anchored = compare_teacher_forced(output, reference, torch.bfloat16, gold_logits=gold)
    assert fixed.passed and fixed.tolerance == 0.06  # without fp32: the fixed bf16 tolerance, loose
    assert anchored.passed and "fp32" in anchored.note
    assert anchored.worst_row == 1 and anchored.tolerance == pytest.approx(2 * eager_error[1])
    # the same error in the row eager gets four times closer to fp32 fails it
    swapped = output.step_logits.clone()
    swapped[0] = reference.step_logits[0] + (reference.step_logits[1] - gold[1]) * gold[0].norm() / gold[1].norm()
    tight = compare_teacher_forced(Generation(tokens=reference.tokens, step_logits=swapped), reference,
                                   torch.bfloat16, gold_logits=gold)
    assert not tight.passed and tight.worst_row == 0 and tight.tolerance == pytest.approx(2 * eager_error[0])
    exact = compare_teacher_forced(output, reference, torch.bfloat16, gold_logits=reference.step_logits)
    assert not exact.passed and exact.tolerance == 2 ** -7  # eager exact: the floor, never a tighter one


@torch.no_grad()
def test_the_fp32_reference_leaves_the_model_as_it_was_and_still_fails_a_cache_bug(monkeypatch):
    from mlcbench.workers.measurement.llm import _fp32_logits
    from mlcbench.workers.interface import WorkflowContext

    model, prompt = model_and_prompt(1, torch.bfloat16)
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    reference = HFGenerateRunner(model, disable_compile=True).generate(prompt, 16, with_logits=True)
    ctx = WorkflowContext(job=job(precision="bf16", output_len=16), device=torch.device("cpu"),
                          dtype=torch.bfloat16, cache_dir=None)
    gold = _fp32_logits(model, prompt, reference, ctx, notes={})
    after = model.state_dict()
    assert all(after[name].dtype == tensor.dtype and torch.equal(after[name], tensor) for name, tensor in before.items())
    assert gold.dtype == torch.float32 and gold.shape == reference.step_logits.shape
    assert not torch.equal(gold, reference.step_logits.float())  # computed in fp32, not a copy of the bf16 run
    monkeypatch.setattr(Block, "attend", _attend_without_decode_writes(Block.attend))
    forced = plain(StaticLlama(model), [model.config.eos_token_id]).generate(
        prompt, 16, with_logits=True, forced_tokens=reference.tokens)
    assert not compare_teacher_forced(forced, reference, torch.bfloat16, gold_logits=gold).passed
