"""A decode step's attention as one Triton kernel: for one new token per row, RoPE on its q and k, k and v written
into the cache, and each query head's attention over the filled cache positions only, grouped-query heads sharing one
read of their K/V (static_llama.cached_attention says what it computes, in PyTorch). Inductor runs the same work as
six kernels a layer (RoPE of q, RoPE of k with its cache write, the v cache write, two cuBLAS batched GEMMs over the
whole cache and the softmax between them), each a few microseconds for
a few KB of data. A torch custom op: torch.compile keeps it inside the compiled step and its CUDA graph, and with
`pdl` it is launched with programmatic dependent launch, as Inductor's own kernels are. Imported only by a job that
asks for it (it needs Triton and a GPU)."""

import torch
import triton
import triton.language as tl

from mlcbench.workers.interface import Unfit

# (positions per block, warps, stages) tried once per shape at its first call (the autotuning is kept on disk): the
# first fits the benchmarks' 32 + 32 tokens in one block of 64; the last was the fastest of 27 at Llama-2 b64 on an
# H100
CONFIGS = [(64, 4, 1), (64, 8, 1), (32, 4, 2), (32, 8, 2), (64, 2, 1), (16, 4, 3), (32, 2, 1)]
# tl.dot's smallest tile: a K/V head's query heads are padded to it
MIN_DOT = 16


def check_fits(config) -> None:
    """Unfit unless the kernel implements this model's attention heads."""
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    if head_dim < MIN_DOT or head_dim & (head_dim - 1):
        raise Unfit(f"the attention kernel needs a power-of-two head_dim of {MIN_DOT} or more; this model's is "
                    f"{head_dim}")


@triton.jit
def _attend(q, keys, values, slots, position, length, scale, running_max, total, acc, dtype):
    """One block of cache positions `slots` (keys and values with the new token's in place) folded into the online
    softmax (running_max, total, acc)."""
    # the scores rounded to the model dtype first, as the batched GEMM of cached_attention returns them
    scores = tl.dot(q, tl.trans(keys)).to(dtype).to(tl.float32) * scale
    scores = tl.where(((slots <= position) & (slots < length))[None, :], scores, float("-inf"))
    new_max = tl.maximum(running_max, tl.max(scores, axis=1))
    rescale = tl.exp(running_max - new_max)
    weights = tl.exp(scores - new_max[:, None])
    total = total * rescale + tl.sum(weights, axis=1)
    acc = acc * rescale[:, None] + tl.dot(weights.to(dtype), values)
    return new_max, total, acc


@triton.jit
def _decode_attention_kernel(q_ptr, k_ptr, v_ptr, cos_ptr, sin_ptr, k_cache_ptr, v_cache_ptr, position_ptr, out_ptr,
                             stride_q, stride_k, stride_v, stride_cache_row, stride_cache_head, length, scale,
                             batch, GROUP: tl.constexpr, BLOCK_GROUP: tl.constexpr, HEAD_DIM: tl.constexpr,
                             BLOCK_POSITIONS: tl.constexpr, PDL: tl.constexpr):
    # one program per (row, K/V head): its GROUP query heads are the rows of q
    row, kv_head = tl.program_id(0), tl.program_id(1)
    dtype = out_ptr.dtype.element_ty
    dims = tl.arange(0, HEAD_DIM)
    # RoPE's half-split rotation: [-x[half:], x[:half]], read as x at the rotated dims with a sign
    rotated_dims = (dims + HEAD_DIM // 2) % HEAD_DIM
    sign = tl.where(dims < HEAD_DIM // 2, -1.0, 1.0)
    group = tl.arange(0, BLOCK_GROUP)
    in_group = group < GROUP
    cache = row * stride_cache_row + kv_head * stride_cache_head
    # the step's position and the first block of earlier positions' keys and values were written before this step
    # began (the position is the step's input, the cache entries earlier steps'): under PDL they stream in while the
    # kernel before is still finishing
    position = tl.load(position_ptr)
    slots = tl.arange(0, BLOCK_POSITIONS)
    offsets = cache + slots[:, None] * HEAD_DIM + dims[None, :]
    earlier = (slots < position)[:, None]
    first_keys = tl.load(k_cache_ptr + offsets, mask=earlier, other=0.0)
    first_values = tl.load(v_cache_ptr + offsets, mask=earlier, other=0.0)
    if PDL:  # everything below reads what the kernels before wrote
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    cos = tl.load(cos_ptr + dims).to(tl.float32)
    sin = tl.load(sin_ptr + dims).to(tl.float32)

    q_heads = q_ptr + row * stride_q + (kv_head * GROUP + group)[:, None] * HEAD_DIM
    q = tl.load(q_heads + dims[None, :], mask=in_group[:, None], other=0.0).to(tl.float32)
    q_rotated = tl.load(q_heads + rotated_dims[None, :], mask=in_group[:, None], other=0.0).to(tl.float32)
    q = (q * cos[None, :] + q_rotated * sign[None, :] * sin[None, :]).to(dtype)
    k_head = k_ptr + row * stride_k + kv_head * HEAD_DIM
    k_new = tl.load(k_head + dims).to(tl.float32) * cos + tl.load(k_head + rotated_dims).to(tl.float32) * sign * sin
    k_new = k_new.to(dtype)
    v_new = tl.load(v_ptr + row * stride_v + kv_head * HEAD_DIM + dims)
    tl.store(k_cache_ptr + cache + position * HEAD_DIM + dims, k_new)
    tl.store(v_cache_ptr + cache + position * HEAD_DIM + dims, v_new)

    # online softmax over the filled positions; the new token's k and v from registers, not read back
    current = (slots == position)[:, None]
    running_max, total, acc = _attend(
        q, tl.where(current, k_new[None, :], first_keys), tl.where(current, v_new[None, :], first_values), slots,
        position, length, scale, tl.full((BLOCK_GROUP,), float("-inf"), tl.float32),
        tl.zeros((BLOCK_GROUP,), tl.float32), tl.zeros((BLOCK_GROUP, HEAD_DIM), tl.float32), dtype)
    for start in range(BLOCK_POSITIONS, position + 1, BLOCK_POSITIONS):
        # names of the loop's own: Triton would carry the first block's (int32 positions) into it (int64 here)
        block = start + tl.arange(0, BLOCK_POSITIONS)
        block_offsets = cache + block[:, None] * HEAD_DIM + dims[None, :]
        is_new = (block == position)[:, None]
        keys = tl.where(is_new, k_new[None, :],
                        tl.load(k_cache_ptr + block_offsets, mask=(block < position)[:, None], other=0.0))
        values = tl.where(is_new, v_new[None, :],
                          tl.load(v_cache_ptr + block_offsets, mask=(block < position)[:, None], other=0.0))
        running_max, total, acc = _attend(q, keys, values, block, position, length, scale, running_max, total, acc,
                                          dtype)
    out = (acc / total[:, None]).to(dtype)
    tl.store(out_ptr + row * (GROUP * tl.num_programs(1) * HEAD_DIM) + (kv_head * GROUP + group)[:, None] * HEAD_DIM
             + dims[None, :], out, mask=in_group[:, None])


# `batch` is in the key only (it sets the grid): a run of every configuration writes the same k and v into the caches,
# so tuning leaves them as one run would
_tuned_attention_kernel = triton.autotune(
    configs=[triton.Config({"BLOCK_POSITIONS": block}, num_warps=warps, num_stages=stages)
             for block, warps, stages in CONFIGS],
    key=["length", "batch", "GROUP", "HEAD_DIM", "PDL"], cache_results=True)(_decode_attention_kernel)


@torch.library.custom_op("mlcbench::decode_attention", mutates_args=("k_cache", "v_cache"))
def _decode_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                      k_cache: torch.Tensor, v_cache: torch.Tensor, position: torch.Tensor, scale: float,
                      pdl: bool) -> torch.Tensor:
    batch, kv_heads, length, head_dim = k_cache.shape
    group = q.shape[-1] // (kv_heads * head_dim)
    out = torch.empty(batch, q.shape[-1], dtype=q.dtype, device=q.device)
    _tuned_attention_kernel[(batch, kv_heads)](
        q, k, v, cos, sin, k_cache, v_cache, position, out, q.stride(0), k.stride(0), v.stride(0), k_cache.stride(0),
        k_cache.stride(1), length, scale, batch, GROUP=group, BLOCK_GROUP=max(MIN_DOT, triton.next_power_of_2(group)),
        HEAD_DIM=head_dim, PDL=pdl, launch_pdl=pdl)
    return out


@_decode_attention.register_fake
def _(q, k, v, cos, sin, k_cache, v_cache, position, scale, pdl):
    return q.new_empty(q.shape[0], q.shape[-1])


def decode_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                     k_cache: torch.Tensor, v_cache: torch.Tensor, positions: torch.Tensor, scale: float,
                     pdl: bool = False) -> torch.Tensor:
    """static_llama.cached_attention for one token (q [batch, 1, heads * head_dim], positions [1]); with `pdl`
    launched with programmatic dependent launch (Hopper and later)."""
    batch, _, width = q.shape
    return _decode_attention(q.reshape(batch, width), k.reshape(batch, -1), v.reshape(batch, -1),
                             cos.reshape(-1).contiguous(), sin.reshape(-1).contiguous(), k_cache, v_cache, positions,
                             scale, pdl).view(batch, 1, width)
