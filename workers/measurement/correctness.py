"""A workflow's output against eager PyTorch's on the same weights and inputs."""

from typing import Optional

import numpy
import torch

from mlcbench.schema import Correctness
from mlcbench.workers.interface import Generation

# relative L2 error allowed per precision: rounding differences of a reordered computation, not a wrong result
TOLERANCE = {torch.float32: 1e-3, torch.float16: 1e-2, torch.bfloat16: 2e-2}


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


def compare_tensors(output: torch.Tensor, reference: torch.Tensor, dtype: torch.dtype) -> Correctness:
    if not isinstance(output, torch.Tensor):
        # jax / numpy arrays through a float64 host copy: torch.as_tensor takes a GPU jax array through DLPack,
        # whose read-only flag (jax arrays are immutable) torch 2.11 rejects
        output = torch.from_numpy(numpy.array(output, dtype=numpy.float64))
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
    finite = bool(torch.isfinite(out).all())
    return Correctness(method="outputs", max_abs_diff=diff.abs().max().item(), rel_l2_error=rel_l2, cosine=cosine,
                       tolerance=tolerance, passed=finite and rel_l2 <= tolerance)


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


def compare_teacher_forced(output: Generation, reference: Generation, dtype: torch.dtype,
                           gold_logits: Optional[torch.Tensor] = None) -> Correctness:
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
    LLM_TOLERANCE."""
    logits, ref_logits = output.step_logits, reference.step_logits
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
        if gold_logits is None:
            noise[:, step] = ref.abs().amax(1)  # scaled by the row's tolerance below
        else:
            gold = gold_logits[:, step].detach().to("cpu", torch.float64)
            squared_eager_error += (ref - gold).pow(2).sum(1)
            squared_gold += gold.pow(2).sum(1)
            noise[:, step] = GOLD_MULTIPLIER * (ref - gold).abs().amax(1)
    row_error = (squared_error.sum(1) / squared_ref.sum(1).clamp_min(1e-300)).sqrt()
    floor = TOLERANCE_FLOOR.get(dtype, LLM_TOLERANCE[dtype])
    eager_error = None
    if gold_logits is None:
        tolerance = torch.full((batch,), LLM_TOLERANCE[dtype], dtype=torch.float64)
        noise *= tolerance[:, None]
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
    note = None
    if eager_error is not None:
        note = (f"tolerance of row {worst_row}: the larger of {floor:g} and {GOLD_MULTIPLIER:g} x eager's own error "
                f"against fp32 in that row ({eager_error[worst_row]:.4f})")
    return Correctness(method="teacher_forced", steps_checked=steps, worst_row=worst_row,
                       worst_step=int(step_error.nan_to_num(float("inf")).argmax()), max_abs_diff=max_abs,
                       rel_l2_error=row_error[worst_row].item(), cosine=cosine.item(),
                       tolerance=tolerance[worst_row].item(), token_agreement=1 - beyond_noise.double().mean().item(),
                       tokens_beyond_noise=int(beyond_noise.sum()), worst_token_margin=margin_ratio.max().item(),
                       calls_checked=1, passed=passed, note=note)


def worst_of(first: Correctness, later: Correctness) -> Correctness:
    """One process's check of its first call and of a call after its timed ones (on the caches they used): the one
    that failed, else the one nearer its tolerance, counting both calls."""
    calls = (first.calls_checked or 1) + (later.calls_checked or 1)

    def severity(check: Correctness) -> tuple[bool, float]:
        return not check.passed, (check.rel_l2_error or 0.0) / check.tolerance if check.tolerance else 0.0

    worst = max((first, later), key=severity)
    return worst.model_copy(update={"calls_checked": calls, "passed": first.passed and later.passed})


def compare_greedy_tokens(tokens: torch.Tensor, ref_tokens: torch.Tensor, why_not_forced: str) -> Correctness:
    """For a loop that can be fed no given tokens and returns no logits (TensorRT-LLM): its own greedy tokens against
    eager's. With random weights they part on near-ties after a few steps, so the check passes when every row's first
    token, chosen from the prompt alone, is eager's (tolerance 0: exact); the agreement over all steps is reported."""
    note = f"tokens only, no teacher forcing: {why_not_forced}"
    if tokens.shape != ref_tokens.shape:
        return Correctness(method="greedy_prefix", note=note, tolerance=0.0, passed=False, token_agreement=0.0)
    same = tokens.cpu() == ref_tokens.cpu()
    return Correctness(method="greedy_prefix", note=note, tolerance=0.0, token_agreement=same.float().mean().item(),
                       passed=bool(same[:, 0].all()))
