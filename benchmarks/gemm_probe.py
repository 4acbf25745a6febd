"""Few-row projections (a decode step at batch 2-64) one way at a time, on the GPU (issue 32's b64 target): how fast
cuBLAS and workers/kernels/gemm.py's Triton kernel read each projection's weights. Each shape is timed over enough
copies of its weight (about 1.5 GB) that nothing stays in L2, the launches replayed as one CUDA graph:

    shapes   cuBLAS (F.linear) against every kernel configuration (BLOCK_N, BLOCK_K, warps, stages) and every split
             of K (1, 2, 4, 8; the splits summed afterwards, not timed here: in the compiled step Inductor folds the
             sum into the kernel that reads the projection)
    chain    one step's projections of every layer and the LM head, each reading the one before's output, as
             F.linear and as gemm.linear (its split rule, its configs autotuned, with and without PDL; the split
             sums are separate kernels here, so this side is, if anything, slow)

    python benchmarks/gemm_probe.py --rows 64 --json gemm.json
"""

import argparse
import itertools
import json
import math

import torch
import triton

from gemv_probe import SHAPES, copy_bandwidth, time_graph

BLOCKS_N, BLOCKS_K, WARPS, STAGES, SPLITS = (64, 128), (64, 128, 256), (4, 8), (3, 4), (1, 2, 4, 8)


def time_launches(launch, count: int) -> float:
    """Milliseconds per launch of `launch(i)` for i in range(count), replayed as one CUDA graph."""
    return time_graph(lambda: [launch(index) for index in range(count)], replays=20) / count


def probe_shapes(model: str, rows: int, copy: float) -> list[dict]:
    from mlcbench.workers.kernels import gemm

    shapes, _, head, dtype = SHAPES[model]
    results = []
    for k, n in shapes + [head]:
        count = max(2, math.ceil(1.5e9 / (n * k * 2)))
        weights = [torch.randn(n, k, dtype=dtype, device="cuda") * k ** -0.5 for _ in range(count)]
        x = torch.randn(rows, k, dtype=dtype, device="cuda")
        gigabytes = n * k * 2 / 1e9
        cublas = time_launches(lambda i: torch.nn.functional.linear(x, weights[i]), count)
        row = {"model": model, "rows": rows, "n": n, "k": k, "cublas_ms": cublas,
               "cublas_of_copy": gigabytes / (cublas / 1e3) / (copy / 1e9), "configs": []}
        for parts, block_n, block_k, warps, stages in itertools.product(SPLITS, BLOCKS_N, BLOCKS_K, WARPS, STAGES):
            if parts > 1 and k // parts < 512:
                continue
            out = torch.empty(parts, rows, n, dtype=dtype if parts == 1 else torch.float32, device="cuda")
            split_len = gemm.split_length(k, parts)

            def launch(i):
                gemm._gemm_kernel[(triton.cdiv(n, block_n), parts)](
                    x, weights[i], out, rows, n, k, x.stride(0), k, split_len, PDL=False,
                    BLOCK_M=max(gemm.MIN_ROWS, triton.next_power_of_2(rows)), BLOCK_N=block_n, BLOCK_K=block_k,
                    num_warps=warps, num_stages=stages)
            try:
                ms = time_launches(launch, count)
            except Exception as error:  # a configuration the compiler cannot fit (shared memory): recorded, skipped
                row["configs"].append({"parts": parts, "block_n": block_n, "block_k": block_k, "warps": warps,
                                       "stages": stages, "error": str(error)[:200]})
                continue
            row["configs"].append({"parts": parts, "block_n": block_n, "block_k": block_k, "warps": warps,
                                   "stages": stages, "ms": ms, "of_copy": gigabytes / (ms / 1e3) / (copy / 1e9)})
        timed = sorted((c for c in row["configs"] if "ms" in c), key=lambda c: c["ms"])
        best = timed[0]
        print(f"{model} {rows}x{k}->{n}: cuBLAS {cublas * 1e3:.1f} us ({row['cublas_of_copy']:.1%} of copy); "
              f"best Triton {best['ms'] * 1e3:.1f} us ({best['of_copy']:.1%}) parts={best['parts']} "
              f"N{best['block_n']} K{best['block_k']} w{best['warps']} s{best['stages']}; rule's parts "
              f"{gemm.splits(n, torch.cuda.get_device_properties(0).multi_processor_count)}: "
              + ", ".join(f"{c['parts']}:{c['ms'] * 1e3:.1f}" for c in timed[:6]), flush=True)
        results.append(row)
    return results


def probe_chain(model: str, rows: int, copy: float) -> dict:
    from mlcbench.workers.kernels import gemm

    shapes, layers, head, dtype = SHAPES[model]
    weights = [[torch.randn(n, k, dtype=dtype, device="cuda") * k ** -0.5 for k, n in shapes]
               for _ in range(layers)] + [[torch.randn(head[1], head[0], dtype=dtype, device="cuda") * head[0] ** -0.5]]
    gigabytes = sum(w.numel() * 2 for layer in weights for w in layer) / 1e9
    first = torch.randn(rows, shapes[0][0], dtype=dtype, device="cuda")

    def step(project):
        x = first
        for layer in weights:
            for weight in layer:
                x = project(x[:, :weight.shape[1]], weight)  # every output is at least as wide as the next input
        return x

    sm_count = torch.cuda.get_device_properties(0).multi_processor_count
    ways = {"cublas": torch.nn.functional.linear, "triton": lambda x, w: gemm.linear(x, w, sm_count),
            "triton_pdl": lambda x, w: gemm.linear(x, w, sm_count, pdl=True)}
    result = {"model": model, "rows": rows, "gigabytes": gigabytes}
    for name, project in ways.items():
        ms = time_graph(lambda: step(project))
        result[name] = {"ms": ms, "of_copy": gigabytes / (ms / 1e3) / (copy / 1e9)}
    print(f"{model} step of {rows} rows, {gigabytes:.2f} GB: "
          + ", ".join(f"{name} {result[name]['ms']:.3f} ms ({result[name]['of_copy']:.1%})" for name in ways),
          flush=True)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama2-7b,tinyllama-1.1b")
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--what", default="shapes,chain")
    parser.add_argument("--json")
    args = parser.parse_args()
    copy = copy_bandwidth()
    print(f"copy {copy / 1e9:.0f} GB/s, {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"triton {triton.__version__}", flush=True)
    report = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
              "copy_gbs": copy / 1e9, "shapes": [], "chains": []}
    for model in args.model.split(","):
        if "shapes" in args.what:
            report["shapes"] += probe_shapes(model, args.rows, copy)
        if "chain" in args.what:
            report["chains"].append(probe_chain(model, args.rows, copy))
        if args.json:
            with open(args.json, "w") as out:
                json.dump(report, out, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
