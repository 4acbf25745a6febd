"""A one-row projection (y = x W^T) as one Triton kernel that streams the weight once: each program reads BLOCK_N
whole rows of W in BLOCK_K-wide tiles, accumulates in fp32 and writes BLOCK_N outputs. It also does what Inductor
would otherwise fuse into its own reduction around the projection (static_llama.one_row_projection says exactly
what, in PyTorch): the RMSNorm of x before it (each program computes x's inverse RMS itself: x is a few KB), SiLU(gate)
* up of a fused gate/up output before it, the residual add after it. A torch custom op, so torch.compile keeps it
inside the compiled step and its CUDA graph; with `pdl` it is launched with programmatic dependent launch, as
Inductor's own kernels are (Inductor's launcher for a kernel it wraps itself, torch.library.triton_op, sets no launch
attribute: torch 2.11-2.13).

Why: with coordinate-descent tuning on (gpt-fast's setting) Inductor turns a batch-1 mm into a reduction kernel of
its own, which streams the weights further below the measured copy than one kernel that reads each weight row
once; without the fusions around it, the extra launches made the step slower. Imported only by
a job that asks for it (it needs Triton and a GPU)."""

from typing import Optional

import torch
import triton
import triton.language as tl

# (BLOCK_N, BLOCK_K, warps, stages), tried once per shape at the first call: the configs that won for some projection
# of TinyLlama or Llama-2-7B out of 48 (2-16 rows, 256-1024 columns, 4/8 warps, 1/3 stages) on an H100
CONFIGS = [(2, 1024, 4, 1), (2, 1024, 4, 3), (4, 512, 4, 1), (4, 512, 8, 3), (4, 1024, 8, 3), (8, 512, 4, 1),
           (8, 512, 8, 1), (16, 512, 4, 1)]


@triton.jit
def _input_tile(x_ptr, norm_ptr, cols, K, inverse_rms, NORM: tl.constexpr, GLU: tl.constexpr, dtype):
    """The columns `cols` of the projection's input: x, or rms_norm(x) with `NORM`, or SiLU(gate) * up with `GLU`."""
    col_mask = cols < K
    if GLU:  # x is [gate | up], K each
        gate = tl.load(x_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
        return (gate * tl.sigmoid(gate)).to(dtype) * tl.load(x_ptr + K + cols, mask=col_mask, other=0.0)
    x = tl.load(x_ptr + cols, mask=col_mask, other=0.0)
    if NORM:
        x = tl.load(norm_ptr + cols, mask=col_mask, other=0.0) * (x.to(tl.float32) * inverse_rms).to(dtype)
    return x


@triton.autotune(configs=[triton.Config({"BLOCK_N": n, "BLOCK_K": k}, num_warps=w, num_stages=s)
                          for n, k, w, s in CONFIGS], key=["N", "K", "NORM", "GLU", "RESIDUAL", "PDL"])
@triton.jit
def _gemv_kernel(x_ptr, w_ptr, y_ptr, norm_ptr, residual_ptr, N, K, stride_n, eps, NORM: tl.constexpr,
                 GLU: tl.constexpr, RESIDUAL: tl.constexpr, PDL: tl.constexpr, BLOCK_N: tl.constexpr,
                 BLOCK_K: tl.constexpr):
    dtype = y_ptr.dtype.element_ty
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = rows < N
    weight_rows = w_ptr + rows[:, None] * stride_n
    # the first tile of weights is loaded before anything else: it depends on no kernel before, so under PDL it
    # streams in while the kernel before is still finishing
    cols = tl.arange(0, BLOCK_K)
    first_weights = tl.load(weight_rows + cols[None, :], mask=row_mask[:, None] & (cols < K)[None, :], other=0.0,
                            eviction_policy="evict_first")
    if PDL:  # x (and the residual) are what the kernels before wrote
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    inverse_rms = 1.0
    if NORM:
        squares = tl.zeros((BLOCK_K,), dtype=tl.float32)
        for start in range(0, K, BLOCK_K):
            x = tl.load(x_ptr + start + cols, mask=start + cols < K, other=0.0).to(tl.float32)
            squares += x * x
        inverse_rms = 1.0 / tl.sqrt(tl.sum(squares, axis=0) / K + eps)
    x = _input_tile(x_ptr, norm_ptr, cols, K, inverse_rms, NORM, GLU, dtype)
    acc = first_weights.to(tl.float32) * x.to(tl.float32)[None, :]
    for start in range(BLOCK_K, K, BLOCK_K):
        cols = start + tl.arange(0, BLOCK_K)
        w = tl.load(weight_rows + cols[None, :], mask=row_mask[:, None] & (cols < K)[None, :], other=0.0,
                    eviction_policy="evict_first")
        x = _input_tile(x_ptr, norm_ptr, cols, K, inverse_rms, NORM, GLU, dtype)
        acc += w.to(tl.float32) * x.to(tl.float32)[None, :]
    y = tl.sum(acc, axis=1).to(dtype)
    if RESIDUAL:
        y = y + tl.load(residual_ptr + rows, mask=row_mask, other=0.0)
    tl.store(y_ptr + rows, y, mask=row_mask)


@torch.library.custom_op("mlcbench::gemv", mutates_args=())
def _gemv(x: torch.Tensor, weight: torch.Tensor, norm: Optional[torch.Tensor], residual: Optional[torch.Tensor],
          eps: float, glu: bool, pdl: bool) -> torch.Tensor:
    n, k = weight.shape
    out = torch.empty(n, dtype=x.dtype, device=x.device)
    # an unused pointer still needs a tensor; x stands in
    _gemv_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK_N"]),)](
        x, weight, out, x if norm is None else norm, x if residual is None else residual, n, k, weight.stride(0),
        eps, NORM=norm is not None, GLU=glu, RESIDUAL=residual is not None, PDL=pdl, launch_pdl=pdl)
    return out


@_gemv.register_fake
def _(x, weight, norm, residual, eps, glu, pdl):
    return x.new_empty(weight.shape[0])


def gemv(x: torch.Tensor, weight: torch.Tensor, norm: Optional[torch.Tensor] = None, eps: float = 0.0,
         glu: bool = False, residual: Optional[torch.Tensor] = None, pdl: bool = False) -> torch.Tensor:
    """static_llama.one_row_projection, on one row: x [..., K] (with glu [..., 2K]) whose leading sizes are all 1,
    weight [N, K] with unit column stride; the result [..., N]. With `pdl` launched with programmatic dependent launch
    (Hopper and later)."""
    flat_residual = None if residual is None else residual.reshape(-1).contiguous()
    return _gemv(x.reshape(-1).contiguous(), weight, norm, flat_residual, eps, glu, pdl).view(*x.shape[:-1],
                                                                                             weight.shape[0])
