"""A few-row projection (y = x W^T, x of up to 64 rows: a decode step at batch up to 64) as one Triton kernel that
streams the weight once. Why: at a few rows cuBLAS reads the weights well below the measured copy inside the step;
alone this kernel is level with cuBLAS, but inside the compiled step, launched with PDL, the next kernel's start
overlaps its tail.
Projections with few outputs (Llama-2's o and down: 4096) give too few output tiles to keep every SM streaming, so
they are split along K as well (`splits`).

Each program computes a [BLOCK_N outputs x all rows] tile with the weights as tl.dot's left operand ("swap AB": the
rows, 2-64, are the small side of the tensor-core instruction, the weight tile the large one) over its share of K,
and writes it in fp32 when K is split: the caller sums the splits (`linear` does, inside the compiled step, where
Inductor folds the sum into the kernel that reads the projection), so there is no atomic, no zeroed buffer and
the result does not depend on the order programs finish. The first weight tile is loaded before the kernel waits on
the one before (PDL), since the weights depend on no earlier kernel. A torch custom op, so torch.compile keeps it
inside the compiled step and its CUDA graph. Imported only by a job that asks for it (it needs Triton and a GPU)."""

import torch
import triton
import triton.language as tl

MAX_ROWS = 64
# tl.dot's smallest tile: fewer rows are padded to it
MIN_ROWS = 16
# (BLOCK_N, BLOCK_K, warps, stages) tried once per shape at its first call (the autotuning is kept on disk): the
# configurations among the three fastest for some projection of Llama-2-7B or TinyLlama at 64 rows, out of 24 with
# each split of K, on an H100
CONFIGS = [(64, 128, 4, 4), (64, 64, 4, 4), (64, 128, 4, 3), (128, 128, 4, 3), (128, 128, 8, 3), (128, 64, 8, 3)]
# the largest BLOCK_K of CONFIGS: each part of a split K starts on a multiple of it
MAX_BLOCK_K = 256


@triton.jit
def _gemm_kernel(x_ptr, w_ptr, y_ptr, M, N, K, stride_xm, stride_wn, split_len, PDL: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    split = tl.program_id(1)
    outputs = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    rows = tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_K)
    start = split * split_len
    end = tl.minimum(start + split_len, K)
    weights = w_ptr + outputs[:, None] * stride_wn + cols[None, :]
    inputs = x_ptr + rows[:, None] * stride_xm + cols[None, :]
    output_mask = (outputs < N)[:, None]
    row_mask = (rows < M)[:, None]
    # the first tile of weights streams in while the kernel before is still finishing (it reads nothing that kernel
    # writes)
    w = tl.load(weights + start, mask=output_mask & (start + cols < end)[None, :], other=0.0,
                eviction_policy="evict_first")
    if PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    x = tl.load(inputs + start, mask=row_mask & (start + cols < end)[None, :], other=0.0)
    acc = tl.dot(w, tl.trans(x))  # [BLOCK_N, BLOCK_M]: y's tile transposed
    for offset in range(start + BLOCK_K, end, BLOCK_K):
        w = tl.load(weights + offset, mask=output_mask & (offset + cols < end)[None, :], other=0.0,
                    eviction_policy="evict_first")
        x = tl.load(inputs + offset, mask=row_mask & (offset + cols < end)[None, :], other=0.0)
        acc = tl.dot(w, tl.trans(x), acc)
    y = y_ptr + split * M * N + rows[None, :] * N + outputs[:, None]
    tl.store(y, acc.to(y_ptr.dtype.element_ty), mask=output_mask & (rows < M)[None, :])


_tuned_gemm_kernel = triton.autotune(
    configs=[triton.Config({"BLOCK_N": n, "BLOCK_K": k}, num_warps=w, num_stages=s) for n, k, w, s in CONFIGS],
    key=["M", "N", "K", "split_len", "PDL"], cache_results=True)(_gemm_kernel)


def splits(n: int, sm_count: int) -> int:
    """How many parts K is split into: the most that keep 64-wide output tiles times parts within one program per
    SM. On an H100 (132 SMs) that is the fastest split for every projection of Llama-2-7B and TinyLlama at 64 rows:
    Llama-2's o and down 2, TinyLlama's q/k/v 2 and o and down 4, the others 1."""
    # plain integers: this runs where dynamo traces the step, and triton.cdiv's wrapper has a keyword default that
    # torch 2.11 saves into the precompile cache as a guard it cannot load again (DefaultsSource)
    tiles, parts = -(-n // 64), 1
    while tiles * parts * 2 <= sm_count:
        parts *= 2
    return parts


def split_length(k: int, parts: int) -> int:
    """Columns of K per part: a multiple of every BLOCK_K, so each part's tiles start on a tile of the whole."""
    return triton.cdiv(triton.cdiv(k, parts), MAX_BLOCK_K) * MAX_BLOCK_K


@torch.library.custom_op("mlcbench::few_row_linear", mutates_args=())
def _few_row_linear(x: torch.Tensor, weight: torch.Tensor, parts: int, pdl: bool) -> torch.Tensor:
    rows, k = x.shape
    n = weight.shape[0]
    out = torch.empty(parts, rows, n, dtype=x.dtype if parts == 1 else torch.float32, device=x.device)
    _tuned_gemm_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK_N"]), parts)](
        x, weight, out, rows, n, k, x.stride(0), weight.stride(0), split_length(k, parts),
        PDL=pdl, BLOCK_M=max(MIN_ROWS, triton.next_power_of_2(rows)), launch_pdl=pdl)
    return out


@_few_row_linear.register_fake
def _(x, weight, parts, pdl):
    return x.new_empty(parts, x.shape[0], weight.shape[0], dtype=x.dtype if parts == 1 else torch.float32)


def linear(x: torch.Tensor, weight: torch.Tensor, sm_count: int, pdl: bool = False) -> torch.Tensor:
    """F.linear(x, weight) for x [..., K] of up to MAX_ROWS rows with unit column stride, weight [N, K] likewise, on a
    GPU of `sm_count` SMs (it sets the split of K); with `pdl` launched with programmatic dependent launch (Hopper
    and later)."""
    n, k = weight.shape
    parts = splits(n, sm_count)
    y = _few_row_linear(x.reshape(-1, k), weight, parts, pdl)
    y = y[0] if parts == 1 else y.sum(0).to(x.dtype)
    return y.view(*x.shape[:-1], n)
