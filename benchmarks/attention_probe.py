"""The one-token attention kernel (workers/kernels/attention.py) alone, on the GPU, at one launch configuration after
another (warps, stages, positions per block): every layer's cache of the model at batch B (Llama-2-7B or TinyLlama
shapes, random), read at position P as one decode step reads it, so nothing stays in L2; the layers' launches
replayed as one CUDA graph. Against the bytes the filled positions hold, at the measured copy bandwidth.

    python benchmarks/attention_probe.py --batch 64 --position 48 --json attention.json
"""

import argparse
import itertools
import json

import torch
import triton

from gemv_probe import copy_bandwidth, time_graph

# heads, kv_heads, head_dim, layers, dtype
SHAPES = {"llama2-7b": (32, 32, 128, 32, torch.float16), "tinyllama-1.1b": (32, 4, 64, 22, torch.bfloat16)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama2-7b")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument("--position", type=int, default=48)
    parser.add_argument("--json")
    args = parser.parse_args()
    from mlcbench.workers.kernels import attention

    copy = copy_bandwidth()
    heads, kv_heads, head_dim, layers, dtype = SHAPES[args.model]
    batch, length = args.batch, args.length
    caches = [[torch.randn(batch, kv_heads, length, head_dim, dtype=dtype, device="cuda") for _ in range(2)]
              for _ in range(layers)]
    q = torch.randn(batch, heads * head_dim, dtype=dtype, device="cuda")
    k, v = (torch.randn(batch, kv_heads * head_dim, dtype=dtype, device="cuda") for _ in range(2))
    cos, sin = torch.randn(head_dim, dtype=dtype, device="cuda"), torch.randn(head_dim, dtype=dtype, device="cuda")
    position = torch.tensor([args.position], device="cuda")
    out = torch.empty_like(q)
    group = heads // kv_heads
    # K and V of the positions before the new one, and the new one's written
    gigabytes = layers * batch * kv_heads * (args.position + 1) * head_dim * 2 * 2 / 1e9
    rows = []
    print(f"copy {copy / 1e9:.0f} GB/s; {args.model} b{batch} position {args.position}: {gigabytes * 1e3:.1f} MB "
          f"a step, {gigabytes / (copy / 1e9) * 1e3:.3f} ms at the copy", flush=True)
    for warps, stages, block in itertools.product((2, 4, 8), (1, 2, 3), (16, 32, 64)):
        def step():
            for k_cache, v_cache in caches:
                attention._decode_attention_kernel[(batch, kv_heads)](
                    q, k, v, cos, sin, k_cache, v_cache, position, out, q.stride(0), k.stride(0), v.stride(0),
                    k_cache.stride(0), k_cache.stride(1), length, head_dim ** -0.5, batch, GROUP=group,
                    BLOCK_GROUP=max(attention.MIN_DOT, triton.next_power_of_2(group)), HEAD_DIM=head_dim,
                    BLOCK_POSITIONS=block, PDL=False, num_warps=warps, num_stages=stages)
        try:
            ms = time_graph(step, replays=30)
        except Exception as error:  # a configuration the compiler cannot fit: recorded, skipped
            rows.append({"warps": warps, "stages": stages, "block_positions": block, "error": str(error)[:200]})
            continue
        rows.append({"warps": warps, "stages": stages, "block_positions": block, "ms_per_step": ms,
                     "of_copy": gigabytes / (ms / 1e3) / (copy / 1e9)})
        print(f"warps {warps} stages {stages} block {block}: {ms:.3f} ms a step ({rows[-1]['of_copy']:.1%})",
              flush=True)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
                       "copy_gbs": copy / 1e9, "model": args.model, "batch": batch, "position": args.position,
                       "gigabytes": gigabytes, "rows": rows}, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
