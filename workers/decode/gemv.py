"""A batch-1 projection (y = x W^T, x one row) as one Triton kernel that streams the weight once: each program reads
BLOCK_N whole rows of W in BLOCK_K-wide tiles, accumulates in fp32 and writes BLOCK_N outputs. A torch custom op
(torch.library.triton_op), so torch.compile keeps it inside the compiled step and its CUDA graph.

Why not Inductor's own: with coordinate-descent tuning on (gpt-fast's setting) Inductor turns a batch-1 mm into a
reduction kernel of its own, which read TinyLlama's weights at about 61 % of the measured copy on an H100
(benchmarks/README, the decode ablation). Imported only by a job that asks for it (it needs Triton and a GPU)."""

import torch
import triton
import triton.language as tl
from torch.library import triton_op, wrap_triton

# (BLOCK_N, BLOCK_K, warps, stages), tried once per (N, K) at the first call: the configs that won for some
# projection of TinyLlama or Llama-2-7B out of 48 (2-16 rows, 256-1024 columns, 4/8 warps, 1/3 stages) on an H100
# (benchmarks/gemv_probe.py, results/h100-gemv-probe-2026-11-26.json)
CONFIGS = [(2, 1024, 4, 1), (2, 1024, 4, 3), (4, 512, 4, 1), (4, 512, 8, 3), (4, 1024, 8, 3), (8, 512, 4, 1),
           (8, 512, 8, 1), (16, 512, 4, 1)]


@triton.autotune(configs=[triton.Config({"BLOCK_N": n, "BLOCK_K": k}, num_warps=w, num_stages=s)
                          for n, k, w, s in CONFIGS], key=["N", "K"])
@triton.jit
def _gemv_kernel(x_ptr, w_ptr, y_ptr, N, K, stride_n, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = rows < N
    acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for start in range(0, K, BLOCK_K):
        cols = start + tl.arange(0, BLOCK_K)
        col_mask = cols < K
        w = tl.load(w_ptr + rows[:, None] * stride_n + cols[None, :], mask=row_mask[:, None] & col_mask[None, :],
                    other=0.0, eviction_policy="evict_first")
        x = tl.load(x_ptr + cols, mask=col_mask, other=0.0)
        acc += w.to(tl.float32) * x.to(tl.float32)[None, :]
    tl.store(y_ptr + rows, tl.sum(acc, axis=1).to(y_ptr.dtype.element_ty), mask=row_mask)


@triton_op("mlcbench::gemv", mutates_args={})
def _gemv(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    n, k = weight.shape
    out = torch.empty(n, dtype=x.dtype, device=x.device)
    wrap_triton(_gemv_kernel)[lambda meta: (triton.cdiv(n, meta["BLOCK_N"]),)](x, weight, out, n, k, weight.stride(0))
    return out


def gemv(x: torch.Tensor, weight: torch.Tensor, bias: "torch.Tensor | None" = None) -> torch.Tensor:
    """F.linear(x, weight, bias) for an x of one row ([..., K] with every leading size 1); any other x goes to
    F.linear itself."""
    if x.numel() != x.shape[-1] or weight.stride(1) != 1:
        return torch.nn.functional.linear(x, weight, bias)
    out = _gemv(x.reshape(-1).contiguous(), weight).view(*x.shape[:-1], weight.shape[0])
    return out if bias is None else out + bias
