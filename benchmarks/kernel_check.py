"""mlcbench's Triton kernels against the PyTorch they replace, at TinyLlama's and Llama-2-7B's shapes: the one-row
projection (workers/kernels/gemv.py against static_llama.one_row_projection, with each of its fusions), the few-row
projection (workers/kernels/gemm.py against F.linear, K split or not, with the LM head) and the decode
attention (workers/kernels/attention.py against static_llama.cached_attention, at several positions, with the cache
they both write compared too). Each is measured against the same math in float64, as the reference in the model's
dtype is: a case fails when the kernel's largest error is beyond `--tolerance` times the reference's own (or one
epsilon of the result's largest magnitude, where that is larger). On a GPU, or on a CPU in Triton's interpreter (fp32 and fp16;
its bf16 is broken):

    TRITON_INTERPRET=1 python benchmarks/kernel_check.py --device cpu --dtype fp16
    python benchmarks/kernel_check.py --device cuda --dtype bf16 [--pdl]
"""

import argparse
import itertools
import json
import sys

import torch

from mlcbench.workers.decode.static_llama import cached_attention, one_row_projection

# hidden, heads, kv_heads, intermediate (random weights: the shapes are what matters)
SHAPES = {"tinyllama-1.1b": (2048, 32, 4, 5632), "llama2-7b": (4096, 32, 32, 11008)}
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def error_ratio(out: torch.Tensor, reference: torch.Tensor, exact: torch.Tensor) -> float:
    """The kernel's largest error against `exact` (float64), over the reference's (at least one epsilon of the largest
    magnitude)."""
    def error(tensor):
        return (tensor.double() - exact).abs().max().item()

    floor = exact.abs().max().item() * torch.finfo(reference.dtype).eps
    return error(out) / max(error(reference), floor, 1e-300)


def double(*tensors: torch.Tensor) -> list[torch.Tensor]:
    return [tensor.double() for tensor in tensors]


def gemv_cases(hidden: int, heads: int, kv_heads: int, inter: int, dtype, device, pdl: bool):
    from mlcbench.workers.kernels import gemv as kernel
    from mlcbench.workers.kernels.gemv import gemv

    if device.type == "cpu":  # Triton's interpreter has no benchmarker to autotune with: one config, the largest tile
        kernel._gemv_kernel.configs = kernel._gemv_kernel.configs[-1:]
    generator = torch.Generator(device).manual_seed(0)

    def randn(*shape, scale=1.0):
        return (torch.randn(*shape, generator=generator, device=device) * scale).to(dtype)

    head_dim = hidden // heads
    qkv = hidden + 2 * kv_heads * head_dim
    x, norm = randn(1, 1, hidden), 1 + randn(hidden, scale=0.1)
    cases = {"qkv+norm": (x, randn(qkv, hidden, scale=hidden ** -0.5), dict(norm=norm, eps=1e-5)),
             "o+residual": (x, randn(hidden, hidden, scale=hidden ** -0.5), dict(residual=randn(1, 1, hidden))),
             "down+glu+residual": (randn(1, 1, 2 * inter), randn(hidden, inter, scale=inter ** -0.5),
                                   dict(glu=True, residual=randn(1, 1, hidden)))}
    for name, (row, weight, fusions) in cases.items():
        exact = one_row_projection(*double(row, weight), **{key: value.double() if torch.is_tensor(value) else value
                                                            for key, value in fusions.items()})
        yield f"gemv {name}", error_ratio(gemv(row, weight, pdl=pdl, **fusions),
                                          one_row_projection(row, weight, **fusions), exact)


def gemm_cases(hidden: int, heads: int, kv_heads: int, inter: int, dtype, device, pdl: bool, rows: int):
    from mlcbench.workers.kernels import gemm

    if device.type == "cpu":  # as for the GEMV: one config in the interpreter, and an H100's SMs for the split of K
        gemm._tuned_gemm_kernel.configs = gemm._tuned_gemm_kernel.configs[:1]
    sm_count = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 132
    generator = torch.Generator(device).manual_seed(2)
    head_dim = hidden // heads
    shapes = {"qkv": (hidden + 2 * kv_heads * head_dim, hidden), "o": (hidden, hidden), "gate/up": (2 * inter, hidden),
              "down": (hidden, inter), "lm head": (32000, hidden)}
    for name, (n, k) in shapes.items():
        x = torch.randn(rows, 1, k, generator=generator, device=device).to(dtype)
        weight = (torch.randn(n, k, generator=generator, device=device) * k ** -0.5).to(dtype)
        exact = torch.nn.functional.linear(*double(x, weight))
        yield (f"gemm {name} {rows} rows, K in {gemm.splits(n, sm_count)}",
               error_ratio(gemm.linear(x, weight, sm_count, pdl), torch.nn.functional.linear(x, weight), exact))


def attention_cases(hidden: int, heads: int, kv_heads: int, dtype, device, pdl: bool, batch: int, length: int):
    from mlcbench.workers.kernels import attention
    from mlcbench.workers.kernels.attention import decode_attention

    if device.type == "cpu":  # one config in the interpreter: the smallest block of positions, the most loop turns
        attention._tuned_attention_kernel.configs = [min(attention._tuned_attention_kernel.configs,
                                                         key=lambda config: config.kwargs["BLOCK_POSITIONS"])]
    generator = torch.Generator(device).manual_seed(1)
    head_dim = hidden // heads
    angles = torch.rand(length, head_dim // 2, generator=generator, device=device) * 6.3
    cos, sin = (torch.cat([f(angles)] * 2, dim=-1).to(dtype) for f in (torch.cos, torch.sin))
    cache = torch.randn(batch, kv_heads, length, head_dim, generator=generator, device=device).to(dtype)
    qkv = torch.randn(batch, 1, hidden + 2 * kv_heads * head_dim, generator=generator, device=device).to(dtype)
    q, k, v = qkv.split([hidden, kv_heads * head_dim, kv_heads * head_dim], dim=-1)
    for position in (0, 31, length - 1):
        positions = torch.tensor([position], device=device)
        tables, scale = (cos[positions], sin[positions]), head_dim ** -0.5
        caches = [(cache.clone(), cache.clone()) for _ in range(2)]
        exact_caches = double(cache, cache)
        out = decode_attention(q, k, v, *tables, *caches[0], positions, scale, pdl)
        reference = cached_attention(q, k, v, *tables, *caches[1], positions, scale)
        exact = cached_attention(*double(q, k, v, *tables), *exact_caches, positions, scale)
        case = f"attention b{batch} cache {length} position {position}"
        yield case, error_ratio(out, reference, exact)
        for name, mine, theirs, truth in zip(("k cache", "v cache"), caches[0], caches[1], exact_caches):
            yield f"{case} {name}", error_ratio(mine, theirs, truth)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", choices=DTYPES, default="bf16")
    parser.add_argument("--pdl", action="store_true", help="launch the kernels with programmatic dependent launch")
    parser.add_argument("--batch-sizes", default="1,4")
    parser.add_argument("--cache-lengths", default="64,200",
                        help="KV cache lengths (positions 0, 31 and the last of each; past 64 the attention kernel "
                             "loops over more than one block of positions)")
    parser.add_argument("--gemm-rows", default="4,64", help="rows of the few-row projection's cases")
    parser.add_argument("--tolerance", type=float, default=2.0,
                        help="the kernel's largest error allowed, in multiples of the reference's")
    parser.add_argument("--json", help="write the differences here")
    args = parser.parse_args()
    device, dtype = torch.device(args.device), DTYPES[args.dtype]
    rows, failed = [], 0
    for model, (hidden, heads, kv_heads, inter) in SHAPES.items():
        cases = list(gemv_cases(hidden, heads, kv_heads, inter, dtype, device, args.pdl))
        for rows_of_gemm in map(int, args.gemm_rows.split(",")):
            cases += gemm_cases(hidden, heads, kv_heads, inter, dtype, device, args.pdl, rows_of_gemm)
        for batch, length in itertools.product(map(int, args.batch_sizes.split(",")),
                                                map(int, args.cache_lengths.split(","))):
            cases += attention_cases(hidden, heads, kv_heads, dtype, device, args.pdl, batch, length)
        for case, diff in cases:
            ok = diff <= args.tolerance
            failed += not ok
            print(f"{model:16} {case:48} error {diff:6.2f}x the reference's {'ok' if ok else 'BEYOND TOLERANCE'}",
                  flush=True)
            rows.append({"model": model, "case": case, "dtype": args.dtype, "pdl": args.pdl, "error_ratio": diff,
                         "ok": ok})
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"torch": torch.__version__, "device": str(device), "rows": rows}, out, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
