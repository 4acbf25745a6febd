"""Batch-1 projections (GEMV) of a decode step, one way at a time, on the GPU (issue 32): what the step's weight reads
can reach. Every layer's weights of the model (TinyLlama or Llama-2-7B shapes, random) are read once per "step", as a
decode step reads them, so nothing stays in L2; each projection reads (the first columns of) the one before's output,
as in the model, so no compiler can merge two projections into one kernel; the step is one CUDA graph, replayed and
timed with CUDA events. Ways:

    cublas     F.linear, as eager PyTorch runs it
    inductor   torch.compile of the same projections with gpt-fast's coordinate-descent tuning, which turns a batch-1
               mm into Inductor's own reduction kernel (torch/_inductor/decomposition.py, `mm`)
    triton     workers/kernels/gemv.py's kernel, one output block per program, its block sizes autotuned per shape

    python benchmarks/gemv_probe.py --json gemv.json
"""

import argparse
import json
import sys
import time

import torch

SHAPES = {  # (in, out) of each projection of one layer, fused q/k/v and gate/up; layers; LM head (in, out); dtype
    "tinyllama-1.1b": ([(2048, 2560), (2048, 2048), (2048, 11264), (5632, 2048)], 22, (2048, 32000), torch.bfloat16),
    "llama2-7b": ([(4096, 12288), (4096, 4096), (4096, 22016), (11008, 4096)], 32, (4096, 32000), torch.float16),
}


def copy_bandwidth() -> float:
    source = torch.empty(2 ** 30, dtype=torch.uint8, device="cuda")
    target = torch.empty_like(source)
    for _ in range(3):
        target.copy_(source)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(20):
        target.copy_(source)
    end.record()
    torch.cuda.synchronize()
    return 2 * source.numel() * 20 / (start.elapsed_time(end) / 1e3)


def time_graph(step, replays: int = 50) -> float:
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(replays):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    samples.sort()
    return samples[len(samples) // 2]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=",".join(SHAPES))
    parser.add_argument("--way", default="cublas,inductor,triton")
    parser.add_argument("--json")
    args = parser.parse_args()
    from mlcbench.workers.kernels.gemv import _gemv_kernel, gemv

    copy = copy_bandwidth()
    rows = []
    print(f"copy {copy / 1e9:.0f} GB/s, {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    for model in args.model.split(","):
        shapes, layers, head, dtype = SHAPES[model]
        # scaled by 1/sqrt(in): a chain of 100+ projections keeps its values in range
        weights = [[torch.randn(out, inp, dtype=dtype, device="cuda") * inp ** -0.5 for inp, out in shapes]
                   for _ in range(layers)] + [[torch.randn(head[1], head[0], dtype=dtype, device="cuda") * head[0] ** -0.5]]
        inputs = {inp: torch.randn(1, inp, dtype=dtype, device="cuda") for inp, _ in shapes + [head]}
        first = torch.randn(1, shapes[0][0], dtype=dtype, device="cuda")
        total_bytes = sum(w.numel() * w.element_size() for layer in weights for w in layer)

        def projections(linear):
            outputs, x = [], first
            for layer in weights:
                for weight in layer:
                    x = linear(x[:, :weight.shape[1]], weight)
                    outputs.append(x)
            return outputs

        reference = projections(torch.nn.functional.linear)
        ways = {
            "cublas": lambda: projections(torch.nn.functional.linear),
            "inductor": torch.compile(lambda: projections(torch.nn.functional.linear),
                                      options={"coordinate_descent_tuning": True}),
            "triton": lambda: projections(gemv),
        }
        for way in args.way.split(","):
            start = time.perf_counter()
            outputs = ways[way]()
            error = max(float((out.float() - ref.float()).abs().max() / ref.float().abs().max())
                        for out, ref in zip(outputs, reference))
            first_s = time.perf_counter() - start
            step_ms = time_graph(ways[way])
            # each shape alone, its weights of every layer in turn (so none stays in L2)
            per_shape = {}
            for index, (inp, out) in enumerate(shapes + [head]):
                mats = [layer[index] for layer in weights[:-1]] if index < len(shapes) else weights[-1]
                linear = {"triton": gemv, "cublas": torch.nn.functional.linear}.get(way) or torch.compile(
                    torch.nn.functional.linear, options={"coordinate_descent_tuning": True})
                ms = time_graph(lambda: [linear(inputs[inp], m) for m in mats])
                per_shape[f"{inp}x{out}"] = round(sum(m.numel() * m.element_size() for m in mats) / (ms / 1e3) / 1e9)
            row = {"model": model, "way": way, "step_ms": round(step_ms, 4), "bytes": total_bytes,
                   "GB/s": round(total_bytes / (step_ms / 1e3) / 1e9), "of_copy": round(total_bytes / (step_ms / 1e3) / copy, 3),
                   "bound_ms": round(total_bytes / copy * 1e3, 4), "shape_GB/s": per_shape,
                   "max_rel_error": error, "first_call_s": round(first_s, 1)}
            if way == "triton":
                row["configs"] = {str(key): str(config) for key, config in _gemv_kernel.cache.items()}
            print(json.dumps(row), flush=True)
            rows.append(row)
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "copy_GB/s": round(copy / 1e9), "rows": rows}, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
