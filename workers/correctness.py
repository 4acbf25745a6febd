"""A workflow's output against eager PyTorch's on the same weights and inputs."""

import torch

from schema import Correctness

# relative L2 error allowed per precision: rounding differences of a reordered computation, not a wrong result
TOLERANCE = {torch.float32: 1e-3, torch.float16: 1e-2, torch.bfloat16: 2e-2}
MIN_COSINE = 0.99


def compare_tensors(output: torch.Tensor, reference: torch.Tensor, dtype: torch.dtype) -> Correctness:
    out = torch.as_tensor(output).detach().to("cpu", torch.float64).reshape(-1)
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


def compare_generation(first_logits: torch.Tensor, tokens: torch.Tensor, ref_logits: torch.Tensor,
                       ref_tokens: torch.Tensor, dtype: torch.dtype) -> Correctness:
    """Prefill logits must match eager's; greedy tokens may drift apart later on near-ties, so their agreement is
    reported, and only the first token (decided by the prefill) must agree."""
    logits = compare_tensors(first_logits, ref_logits, dtype)
    agreement = (tokens.cpu() == ref_tokens.cpu()).float().mean().item() if tokens.shape == ref_tokens.shape else 0.0
    first_token_agrees = tokens.shape == ref_tokens.shape and bool((tokens[:, 0].cpu() == ref_tokens[:, 0].cpu()).all())
    cosine_ok = logits.cosine is not None and logits.cosine >= MIN_COSINE
    return logits.model_copy(update={
        "token_agreement": agreement,
        "passed": cosine_ok and first_token_agrees,
    })
