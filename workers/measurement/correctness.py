"""A workflow's output against eager PyTorch's on the same weights and inputs."""

from dataclasses import dataclass
from typing import Callable, Optional

import numpy
import torch

from mlcbench.schema import Correctness
from mlcbench.workers.interface import Generation

# relative L2 error allowed per precision: rounding differences of a reordered computation, not a wrong result
TOLERANCE = {torch.float32: 1e-3, torch.float16: 1e-2, torch.bfloat16: 2e-2}


def as_torch(output: object) -> torch.Tensor:
    """A workflow's output as a torch tensor: jax / numpy arrays through a float64 host copy (torch.as_tensor takes a
    GPU jax array through DLPack, whose read-only flag (jax arrays are immutable) torch 2.11 rejects)."""
    if isinstance(output, torch.Tensor):
        return output
    return torch.from_numpy(numpy.array(output, dtype=numpy.float64))


def _not_finite(*outputs: tuple[str, torch.Tensor]) -> Optional[str]:
    """Which outputs hold NaN or infinite values, and how many: no error can be measured on them (a NaN would reach
    the check's figures, and JSON has no NaN); None when every value is finite."""
    found = []
    for name, values in outputs:
        # one step at a time: a mask of a long generation's logits on the GPU would be as large as the logits
        bad = sum(int((~torch.isfinite(step)).sum()) for step in (values.unbind(1) if values.dim() > 1 else [values]))
        if bad:
            found.append(f"{name}: {bad} of {values.numel()} value(s) NaN or infinite")
    return "; ".join(found) or None


def compare_tensors(output: object, reference: torch.Tensor, dtype: torch.dtype) -> Correctness:
    output = as_torch(output)
    out = output.detach().to("cpu", torch.float64).reshape(-1)
    ref = reference.detach().to("cpu", torch.float64).reshape(-1)
    tolerance = TOLERANCE[dtype]
    if out.shape != ref.shape:
        return Correctness(method="outputs", tolerance=tolerance, passed=False)
    not_finite = _not_finite(("the workflow's output", out), ("eager's output", ref))
    if not_finite is not None:
        return Correctness(method="outputs", tolerance=tolerance, passed=False, not_finite=not_finite)
    diff = out - ref
    rel_l2 = (diff.norm() / ref.norm().clamp_min(1e-30)).item()
    cosine = torch.nn.functional.cosine_similarity(out, ref, dim=0).item()
    return Correctness(method="outputs", max_abs_diff=diff.abs().max().item(), rel_l2_error=rel_l2, cosine=cosine,
                       tolerance=tolerance, passed=rel_l2 <= tolerance)


# A timed call's output may differ from the checked call's by this much (relative L2): nothing for a deterministic
# kernel, about a rounding of the dtype for one whose reductions run in another order from call to call (atomics,
# split-K); a wrong result differs by more
CALL_TO_CALL_NOISE = {torch.float32: 2.0 ** -16, torch.float16: 2.0 ** -10, torch.bfloat16: 2.0 ** -7}
# devices whose ops run as they are issued: on an XLA tensor an op kept for after the timed calls would run inside the
# next one's graph
EAGER_DEVICES = ("cpu", "cuda")


# Seeded input sets (prompts, or a synthetic model's inputs) each with its own checked output, cycled through the timed
# calls: a call that hands back an earlier call's output, computing nothing, differs from its own set's
INPUT_SETS = 3


def with_timed_calls(checked: Correctness, calls: int, failed: int, why: str, **fields: object) -> Correctness:
    """`checked` with the comparison of its process's timed calls added: failed where any of them differed."""
    note = "; ".join(filter(None, [checked.note, why if failed else ""])) or None
    return checked.model_copy(update={"timed_calls_checked": calls, "timed_calls_failed": failed,
                                      "passed": checked.passed and failed == 0, "note": note, **fields})


@dataclass(frozen=True)
class InputSetsChecked:
    """A process's input sets: how many its timed calls cycle through (each with a checked call against eager's
    output for it), and why any failed."""

    sets: int
    failures: tuple[str, ...] = ()


def with_input_sets(checked: Correctness, input_sets: InputSetsChecked) -> Correctness:
    """`checked` with its input sets' checked calls added: failed where any set's output was not eager's for it."""
    note = "; ".join(filter(None, [checked.note, *input_sets.failures])) or None
    return checked.model_copy(update={"input_sets": input_sets.sets,
                                      "passed": checked.passed and not input_sets.failures, "note": note})


def compare_with_checked_call(tokens: torch.Tensor, checked: Generation, dtype: torch.dtype) -> tuple[bool, int, str]:
    """A timed call's tokens [batch, steps] against its input set's checked call, which ran free on the same inputs
    (same program, same prompt): equal in each row up to the first step where they part, and they may part only where
    the checked call's own logits put the timed call's token within CALL_TO_CALL_NOISE of its own choice (twice that
    rounding of its largest logit there); the row's later steps follow another prefix and are not compared. Without
    the checked call's logits (a loop that returns none) every token must be equal. Returns whether it failed, the
    tokens compared and why."""
    expected = checked.tokens.cpu()
    if tokens.shape != expected.shape:
        return True, 0, f"generated {tuple(tokens.shape)} tokens, its checked call {tuple(expected.shape)}"
    tokens = tokens.cpu()
    batch, steps = expected.shape
    compared, first = 0, ""
    for row in range(batch):
        parted = (tokens[row] != expected[row]).nonzero()
        if len(parted) == 0:
            compared += steps
            continue
        step = int(parted[0])
        compared += step + 1
        chosen, own = int(tokens[row, step]), int(expected[row, step])
        if checked.step_logits is not None:
            logits = checked.step_logits[row, step].detach().to("cpu", torch.float64)
            margin = (logits[own] - logits[chosen]).item()
            noise = CALL_TO_CALL_NOISE[dtype] * logits.abs().max().item()
            if margin <= 2 * noise:
                continue
            why = f"its checked call's margin for {own} is {margin:.3g}, beyond twice {noise:.3g} ({dtype} noise)"
        else:
            why = "its loop returns no logits: every token must be its checked call's"
        first = first or f"chose token {chosen} at row {row}, step {step}, where its checked call chose {own}: {why}"
    return bool(first), compared, first


# Without an fp32 reference (an fp32 job, or fp32 weights that did not fit) a row may be this far from eager: LLM logits
# go through every layer, and bf16 rounding differences of fused kernels add up to a few percent
LLM_TOLERANCE = {torch.float32: 1e-3, torch.float16: 3e-2, torch.bfloat16: 6e-2}
# With one, a row may be as far from eager as GOLD_MULTIPLIER times eager's own error against it in that row: two
# independent roundings of the same model are about sqrt(2) times as far apart as each is from exact (the 83 half-
# precision LLM results in benchmarks/results, H100 and H200, were 0.84-1.35x eager's own error at their worst step,
# pooled over rows; the CPU's tiny models up to 1.22x per row), while each bug planted in
# tests/workers/test_planted_bugs.py is 8x or more
GOLD_MULTIPLIER = 2.0
# ... and never less than about two roundings of the dtype, so a row that eager happens to get near-exact allows no
# less than rounding
TOLERANCE_FLOOR = {torch.float16: 2.0 ** -10, torch.bfloat16: 2.0 ** -7}
# A program of its own rounds differently from eager: the 83 half-precision results were 0.84-1.35x eager's own error
# against fp32 away from eager; logits nearer eager's than this share of it are eager's own, handed back with an
# epsilon added
CLOSE_TO_EAGER = 0.05
# A token choice within noise of eager's is a rounding flip only as often as rounding explains: the expected count,
# from the workflow's own logit error and eager's margin at each step (see expected_flips), may be exceeded by this
# factor and FLIP_SLACK tokens (correct bf16 loops flipped up to 19 % of their tokens on random weights; one that took
# the second-best token wherever the top two were within 2 % flipped up to 16 %)
FLIP_FACTOR, FLIP_SLACK = 2.0, 3


def logit_noise(ref: torch.Tensor, gold: Optional[torch.Tensor], dtype: torch.dtype) -> torch.Tensor:
    """How far a logit of each row [batch] can move by rounding alone at one step, from eager's logits there
    ([batch, vocab], float64): GOLD_MULTIPLIER times eager's largest error against its logits in fp32 (`gold`), or
    without them the precision's LLM_TOLERANCE times eager's largest logit. Two tokens whose logits are more than
    twice that apart are not a near-tie: a correct workflow chooses eager's."""
    if gold is None:
        return LLM_TOLERANCE[dtype] * ref.abs().amax(1)
    return GOLD_MULTIPLIER * (ref - gold).abs().amax(1)


def certain_steps(reference: Generation, dtype: torch.dtype, gold_logits: Optional[torch.Tensor]) -> torch.Tensor:
    """Per row [batch], the steps of eager's free-running generation before its first near-tie: a step where eager's
    top-2 margin is within twice the logit noise there. Up to it, a correct loop running free chooses eager's tokens;
    from it on, rounding may part them, and only a teacher-forced check can judge the logits."""
    logits, chosen = reference.step_logits, reference.tokens.cpu()
    assert logits is not None, "eager's reference is generated with its logits"
    batch, steps = chosen.shape
    certain = torch.full((batch,), steps, dtype=torch.long)
    for step in range(steps):
        ref = logits[:, step].detach().to("cpu", torch.float64)
        gold = None if gold_logits is None else gold_logits[:, step].detach().to("cpu", torch.float64)
        # eager's token against the best other (a token generate() kept out, such as EOS, may have been higher:
        # the margin is then negative, a near-tie)
        token = chosen[:, step:step + 1]
        others = ref.scatter(1, token, float("-inf")).amax(1)
        near_tie = (ref.gather(1, token)[:, 0] - others) <= 2 * logit_noise(ref, gold, dtype)
        certain = torch.where(near_tie & (certain == steps), torch.full_like(certain, step), certain)
    return certain


def certain_mask(reference: Generation, dtype: torch.dtype, gold_logits: Optional[torch.Tensor]) -> torch.Tensor:
    """[batch, steps]: the steps of each row before eager's first near-tie (certain_steps), where a loop running free
    must choose eager's token."""
    certain = certain_steps(reference, dtype, gold_logits)
    return torch.arange(reference.tokens.shape[1])[None, :] < certain[:, None]


def against_eager(tokens: torch.Tensor, reference: Generation, compared: torch.Tensor) -> str:
    """Why a call's own tokens differ from eager's free-running ones over the `compared` steps ("" where they do
    not)."""
    expected = reference.tokens.cpu()
    if tokens.shape != expected.shape:
        return f"generated {tuple(tokens.shape)} tokens"
    differs = (tokens.cpu() != expected) & compared
    if not bool(differs.any()):
        return ""
    row, step = (int(i) for i in differs.nonzero()[0])
    return (f"running free chose token {int(tokens[row, step])} at row {row}, step {step}, where eager's margin for "
            f"{int(expected[row, step])} is beyond noise")


def compare_teacher_forced(output: Generation, reference: Generation, dtype: torch.dtype,
                           gold_logits: Optional[torch.Tensor] = None,
                           runs_eager_kernels: bool = False) -> Correctness:
    """A workflow fed eager's greedy tokens (LLMRunner.generate's forced_tokens) against eager's own generation, row by
    row (the worst row decides: a bug in one row is not diluted by the others):
    - its logits over every output step (0: the prefill, then each decode step) within the row's tolerance (relative
      L2 over the row's steps);
    - its own token choice eager's greedy token, or one that eager's margin puts within numerical noise: eager's logit
      for its pick exceeds the other's by no more than two logits can move there (twice GOLD_MULTIPLIER times eager's
      largest logit error against fp32 at that row and step; without an fp32 reference, twice the row's tolerance
      times its largest logit). A token beyond that fails the check, however close the logits.

    gold_logits [batch, steps, vocab]: eager's logits in fp32 for the same tokens; a row's tolerance is then
    GOLD_MULTIPLIER times eager's own error against them in that row (never below TOLERANCE_FLOOR), else
    LLM_TOLERANCE. Logits bit-identical to eager's fail it (identical_to_reference) unless runs_eager_kernels."""
    logits, ref_logits = output.step_logits, reference.step_logits
    assert ref_logits is not None, "eager's reference is generated with its logits"
    if (logits is None or logits.shape != ref_logits.shape or output.tokens.shape != reference.tokens.shape):
        got = None if logits is None else tuple(logits.shape)
        return Correctness(method="teacher_forced", tolerance=LLM_TOLERANCE[dtype], passed=False, steps_checked=0,
                           note=f"logits {got} and tokens {tuple(output.tokens.shape)} against eager's "
                                f"{tuple(ref_logits.shape)} and {tuple(reference.tokens.shape)}")
    not_finite = _not_finite(("the workflow's logits", logits), ("eager's logits", ref_logits),
                             *([("eager's fp32 logits", gold_logits)] if gold_logits is not None else []))
    if not_finite is not None:
        return Correctness(method="teacher_forced", tolerance=LLM_TOLERANCE[dtype], passed=False, steps_checked=0,
                           not_finite=not_finite)
    chosen, expected = output.tokens.cpu(), reference.tokens.cpu()
    batch, steps = expected.shape
    # per row and step (float64, one step at a time: [batch, vocab] stays small)
    squared_error, squared_ref, squared_out, dot = (torch.zeros(batch, steps, dtype=torch.float64) for _ in range(4))
    squared_eager_error, squared_gold = torch.zeros(batch, dtype=torch.float64), torch.zeros(batch, dtype=torch.float64)
    margin, noise = torch.zeros(batch, steps, dtype=torch.float64), torch.zeros(batch, steps, dtype=torch.float64)
    flip_chance = torch.zeros(batch, steps, dtype=torch.float64)
    max_abs, finite = 0.0, True
    for step in range(steps):
        out = logits[:, step].detach().to("cpu", torch.float64)
        ref = ref_logits[:, step].detach().to("cpu", torch.float64)
        diff = out - ref
        finite = finite and bool(torch.isfinite(out).all())
        max_abs = max(max_abs, diff.abs().max().item())
        squared_error[:, step], squared_ref[:, step] = diff.pow(2).sum(1), ref.pow(2).sum(1)
        squared_out[:, step], dot[:, step] = out.pow(2).sum(1), (out * ref).sum(1)
        margin[:, step] = (ref.gather(1, expected[:, step:step + 1]) - ref.gather(1, chosen[:, step:step + 1]))[:, 0]
        gold = None if gold_logits is None else gold_logits[:, step].detach().to("cpu", torch.float64)
        noise[:, step] = logit_noise(ref, gold, dtype)
        flip_chance[:, step] = flip_probability(ref, diff, expected[:, step])
        if gold is not None:
            squared_eager_error += (ref - gold).pow(2).sum(1)
            squared_gold += gold.pow(2).sum(1)
    row_error = (squared_error.sum(1) / squared_ref.sum(1).clamp_min(1e-300)).sqrt()
    floor = TOLERANCE_FLOOR.get(dtype, LLM_TOLERANCE[dtype])
    eager_error = None
    if gold_logits is None:
        tolerance = torch.full((batch,), LLM_TOLERANCE[dtype], dtype=torch.float64)
    else:
        eager_error = (squared_eager_error / squared_gold.clamp_min(1e-300)).sqrt()
        tolerance = (GOLD_MULTIPLIER * eager_error).clamp_min(floor)
    differs = chosen != expected
    # how much of the noise allowed there eager's margin takes (> 1: beyond noise); 0 where the token is eager's
    margin_ratio = torch.where(differs, margin / (2 * noise).clamp_min(1e-300), torch.zeros_like(margin))
    beyond_noise = differs & (margin_ratio > 1)
    worst_row = int((row_error / tolerance).nan_to_num(float("inf")).argmax())
    step_error = (squared_error[worst_row] / squared_ref[worst_row].clamp_min(1e-300)).sqrt()
    cosine = dot[worst_row].sum() / (squared_out[worst_row].sum() * squared_ref[worst_row].sum()).sqrt().clamp_min(1e-300)
    passed = finite and bool((row_error <= tolerance).all()) and not bool(beyond_noise.any())
    notes = []
    if eager_error is not None:
        notes.append(f"tolerance of row {worst_row}: the larger of {floor:g} and {GOLD_MULTIPLIER:g} x eager's own "
                     f"error against fp32 in that row ({eager_error[worst_row]:.4f})")
    flips, expected_flips = int((differs & ~beyond_noise).sum()), flip_chance.sum().item()
    if flips > FLIP_FACTOR * expected_flips + FLIP_SLACK:
        passed = False
        notes.append(f"{flips} token(s) differ from eager's within noise where its own logit error explains "
                     f"{expected_flips:.1f}: more than {FLIP_FACTOR:g}x that + {FLIP_SLACK}")
    # eager's logits handed back: no compiled path computes every logit bit for bit as eager does, nor within a small
    # share of eager's own error against fp32
    identical = max_abs == 0.0 and not runs_eager_kernels
    closeness = None if eager_error is None else (row_error / eager_error.clamp_min(1e-300)).max().item()
    if identical:
        passed = False
        notes.append("every logit bit-identical to eager's: eager's output, not the workflow's own (its catalog row "
                     "does not say it runs eager's kernels)")
    elif closeness is not None and closeness < CLOSE_TO_EAGER and not runs_eager_kernels:
        identical = True
        passed = False
        notes.append(f"every row's logits within {closeness:.2g} x eager's own error against fp32 of eager's (under "
                     f"{CLOSE_TO_EAGER:g}): eager's output with an epsilon, not a program of its own")
    return Correctness(method="teacher_forced", steps_checked=steps, worst_row=worst_row,
                       worst_step=int(step_error.nan_to_num(float("inf")).argmax()), max_abs_diff=max_abs,
                       rel_l2_error=row_error[worst_row].item(), cosine=cosine.item(),
                       tolerance=tolerance[worst_row].item(), token_agreement=1 - differs.double().mean().item(),
                       token_agreement_within_noise=1 - beyond_noise.double().mean().item(),
                       tokens_beyond_noise=int(beyond_noise.sum()), worst_token_margin=margin_ratio.max().item(),
                       calls_checked=1, identical_to_reference=identical, passed=passed,
                       note="; ".join(notes) or None)


def flip_probability(ref: torch.Tensor, diff: torch.Tensor, expected: torch.Tensor) -> torch.Tensor:
    """Per row [batch], the chance that rounding alone makes a workflow choose another token than eager's `expected`
    at one step: eager's margin over its best other token (ref [batch, vocab]) against the spread of the difference
    of two of the workflow's logit errors there (diff = its logits - eager's; the errors of two logits are about
    independent, so the spread is sqrt(2) x their standard deviation)."""
    own = ref.gather(1, expected[:, None])[:, 0]
    margin = (own - ref.scatter(1, expected[:, None], float("-inf")).amax(1)).clamp_min(0)
    spread = (2 ** 0.5 * diff.std(1)).clamp_min(1e-300)
    return 0.5 * torch.special.erfc(margin / (spread * 2 ** 0.5))


def worst_of(first: Correctness, later: Correctness) -> Correctness:
    """One process's check of its first call and of a call after its timed ones (on the caches they used): the one
    that failed, else the one nearer its tolerance, counting both calls."""
    calls = (first.calls_checked or 1) + (later.calls_checked or 1)

    def severity(check: Correctness) -> tuple[bool, float]:
        return not check.passed, (check.rel_l2_error or 0.0) / check.tolerance if check.tolerance else 0.0

    worst = max((first, later), key=severity)
    return worst.model_copy(update={"calls_checked": calls, "passed": first.passed and later.passed})


def compare_greedy_tokens(tokens: torch.Tensor, reference: Generation, dtype: torch.dtype,
                          gold_logits: Optional[torch.Tensor], why_not_forced: str) -> Correctness:
    """For a loop that can be fed no given tokens and returns no logits (TensorRT-LLM): its own greedy tokens against
    eager's, exactly, at every step of each row before eager's first near-tie (certain_steps; past it, rounding may
    part them and tokens alone judge nothing): tolerance 0. The raw agreement over all steps is reported."""
    note = f"tokens only, no teacher forcing: {why_not_forced}"
    if tokens.shape != reference.tokens.shape:
        return Correctness(method="greedy_prefix", note=note, tolerance=0.0, passed=False, token_agreement=0.0)
    compared = certain_mask(reference, dtype, gold_logits)
    why = against_eager(tokens, reference, compared)
    same = tokens.cpu() == reference.tokens.cpu()
    return Correctness(method="greedy_prefix", note="; ".join(filter(None, [note, why])), tolerance=0.0,
                       token_agreement=same.float().mean().item(), steps_checked=int(tokens.shape[1]),
                       free_running_tokens=int(compared.sum()), passed=not why)


def in_fp32(model: torch.nn.Module, dtype: torch.dtype, notes: dict, compute: Callable[[], torch.Tensor]) \
        -> Optional[torch.Tensor]:
    """compute() with the model's parameters in fp32, on the CPU; None where they do not fit (noted: the check keeps
    its fixed tolerance). Only the parameters change precision and go back exactly (half -> fp32 -> half); buffers
    such as RoPE's inverse frequencies stay as they are."""
    parameters = list(model.parameters())
    try:
        for parameter in parameters:
            parameter.data = parameter.data.float()
        return compute().cpu()
    except torch.cuda.OutOfMemoryError:
        notes["fp32_reference"] = "did not fit: fixed tolerance"
        return None
    finally:
        for parameter in parameters:
            parameter.data = parameter.data.to(dtype)
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
