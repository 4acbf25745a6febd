"""A workflow's output against eager PyTorch's on the same weights and inputs."""

from typing import Optional

import numpy
import torch

from mlcbench.schema import Correctness
from mlcbench.workers.interface import Generation

# relative L2 error allowed per precision: rounding differences of a reordered computation, not a wrong result
TOLERANCE = {torch.float32: 1e-3, torch.float16: 1e-2, torch.bfloat16: 2e-2}
MIN_COSINE = 0.99


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
    diff = out - ref
    rel_l2 = (diff.norm() / ref.norm().clamp_min(1e-30)).item()
    cosine = torch.nn.functional.cosine_similarity(out, ref, dim=0).item()
    finite = bool(torch.isfinite(out).all())
    return Correctness(method="outputs", max_abs_diff=diff.abs().max().item(), rel_l2_error=rel_l2, cosine=cosine,
                       tolerance=tolerance, passed=finite and rel_l2 <= tolerance)


# LLM logits go through every layer: bf16 rounding differences of fused kernels add up to a few percent
LLM_TOLERANCE = {torch.float32: 1e-3, torch.float16: 3e-2, torch.bfloat16: 6e-2}
# Where eager itself, in half precision, is far from the same model in fp32 (a deep model, a large vocabulary), a
# workflow may be as far from eager as GOLD_MULTIPLIER times that: the dynamo benchmark harness's rule against a
# higher-precision reference (its multiplier is 2 on its own outputs; errors of two independent roundings add, so 3
# between the workflow and eager). Never stricter than LLM_TOLERANCE.
GOLD_MULTIPLIER = 3.0


def _rel_l2(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def compare_teacher_forced(output: Generation, reference: Generation, dtype: torch.dtype,
                           gold_logits: Optional[torch.Tensor] = None) -> Correctness:
    """A workflow fed eager's greedy tokens (LLMRunner.generate's forced_tokens) against eager's own generation: at
    every output step (0: the prefill, then each decode step) its logits within the tolerance (relative L2 and cosine
    over the batch's rows of that step), and its own token choice eager's greedy token or a near-tie. A near-tie is a
    token eager's logits put within that step's numeric error of eager's pick (twice the row's largest logit
    difference): the argmax of logits that close to eager's can pick no other token, a loop that samples can.

    gold_logits [batch, steps, vocab]: eager's logits in fp32 for the same tokens; a step's tolerance then widens to
    GOLD_MULTIPLIER times eager's own error against them."""
    tolerance = LLM_TOLERANCE[dtype]
    logits, ref_logits = output.step_logits, reference.step_logits
    if (logits is None or logits.shape != ref_logits.shape or output.tokens.shape != reference.tokens.shape):
        got = None if logits is None else tuple(logits.shape)
        return Correctness(method="teacher_forced", tolerance=tolerance, passed=False, steps_checked=0,
                           note=f"logits {got} and tokens {tuple(output.tokens.shape)} against eager's "
                                f"{tuple(ref_logits.shape)} and {tuple(reference.tokens.shape)}")
    chosen, expected = output.tokens.cpu(), reference.tokens.cpu()
    rel_l2, allowed, eager_error, cosine, max_abs, agrees, finite = [], [], [], [], 0.0, [], True
    for step in range(ref_logits.shape[1]):  # one step at a time: [batch, vocab] in float64 stays small
        out = logits[:, step].detach().to("cpu", torch.float64)
        ref = ref_logits[:, step].detach().to("cpu", torch.float64)
        diff = out - ref
        finite = finite and bool(torch.isfinite(out).all())
        rel_l2.append(_rel_l2(out, ref))
        eager_error.append(None if gold_logits is None
                           else _rel_l2(ref, gold_logits[:, step].detach().to("cpu", torch.float64)))
        allowed.append(tolerance if eager_error[-1] is None else max(tolerance, GOLD_MULTIPLIER * eager_error[-1]))
        cosine.append(torch.nn.functional.cosine_similarity(out.reshape(-1), ref.reshape(-1), dim=0).item())
        max_abs = max(max_abs, diff.abs().max().item())
        gap = ref.gather(1, expected[:, step:step + 1]) - ref.gather(1, chosen[:, step:step + 1])
        near_tie = gap[:, 0] <= 2 * diff.abs().amax(dim=1)
        agrees.append((chosen[:, step] == expected[:, step]) | near_tie)
    agreement = torch.stack(agrees, dim=1)
    # the step nearest its own tolerance (ties: the lower cosine)
    worst = max(range(len(rel_l2)), key=lambda step: (rel_l2[step] / allowed[step], -cosine[step]))
    passed = (finite and all(error <= limit for error, limit in zip(rel_l2, allowed))
              and all(c >= MIN_COSINE for c in cosine) and bool(agreement.all()))
    note = None
    if eager_error[worst] is not None:
        note = (f"tolerance at step {worst}: the larger of {tolerance:g} and {GOLD_MULTIPLIER:g} x eager's own error "
                f"against fp32 there ({eager_error[worst]:.4f})")
    return Correctness(method="teacher_forced", steps_checked=len(rel_l2), worst_step=worst, max_abs_diff=max_abs,
                       rel_l2_error=rel_l2[worst], cosine=min(cosine), tolerance=allowed[worst],
                       token_agreement=agreement.float().mean().item(), passed=passed, note=note)


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
