"""A workflow's output against eager PyTorch's on the same weights and inputs."""

from typing import Optional

import numpy
import torch

from mlcbench.schema import Correctness

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
        return Correctness(tolerance=tolerance, passed=False)
    diff = out - ref
    rel_l2 = (diff.norm() / ref.norm().clamp_min(1e-30)).item()
    cosine = torch.nn.functional.cosine_similarity(out, ref, dim=0).item()
    finite = bool(torch.isfinite(out).all())
    return Correctness(max_abs_diff=diff.abs().max().item(), rel_l2_error=rel_l2, cosine=cosine,
                       tolerance=tolerance, passed=finite and rel_l2 <= tolerance)


# LLM logits go through every layer: bf16 rounding differences of fused kernels add up to a few percent
LLM_TOLERANCE = {torch.float32: 1e-3, torch.float16: 3e-2, torch.bfloat16: 6e-2}


def compare_generation(step_logits: Optional[torch.Tensor], tokens: torch.Tensor, ref_logits: torch.Tensor,
                       ref_tokens: torch.Tensor, dtype: torch.dtype) -> Correctness:
    """Per-step logits [batch, steps, vocab] against eager's, wherever both have generated the same tokens so far
    (a step's logits are comparable only while the prefixes agree). Random-weight models give near-flat logits, so
    greedy tokens part on near-ties: token agreement is reported, and the logits decide.

    A runner that cannot return logits cheaply (TensorRT-LLM) gives None: then only tokens are compared, and the
    check passes when every row's first token, chosen from the prompt alone, is eager's (tolerance 0: exact)."""
    if step_logits is None:
        if tokens.shape != ref_tokens.shape:
            return Correctness(tolerance=0.0, passed=False, token_agreement=0.0)
        same = tokens.cpu() == ref_tokens.cpu()
        return Correctness(tolerance=0.0, token_agreement=same.float().mean().item(), passed=bool(same[:, 0].all()))
    tolerance = LLM_TOLERANCE[dtype]
    if tokens.shape != ref_tokens.shape or step_logits.shape != ref_logits.shape:
        return Correctness(tolerance=tolerance, passed=False, token_agreement=0.0)
    same = (tokens.cpu() == ref_tokens.cpu())
    # step k is comparable when tokens 0..k-1 agree
    prefix_agrees = torch.cat([torch.ones_like(same[:, :1]), same[:, :-1].cumprod(dim=1).bool()], dim=1)
    mask = prefix_agrees.to(step_logits.device)
    logits = compare_tensors(step_logits[mask], ref_logits[mask], dtype)
    cosine_ok = logits.cosine is not None and logits.cosine >= MIN_COSINE
    rel_ok = logits.rel_l2_error is not None and logits.rel_l2_error <= tolerance
    return logits.model_copy(update={
        "token_agreement": same.float().mean().item(),
        "tolerance": tolerance,
        "passed": cosine_ok and rel_ok and bool(torch.isfinite(step_logits).all()),
    })
