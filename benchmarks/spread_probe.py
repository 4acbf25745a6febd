"""Where does the between-process spread of sub-millisecond cells come from? (issue 31)

Runs each cell in N fresh processes, interleaved (process k of every cell, then process k+1), and in each process
times the same call five ways, so that host and device parts of a call can be told apart:

  alone       each call alone between two CUDA events, after the previous call finished: the worker's figure
  launch      host time to return from the call (no sync): what Python, dispatch and the launches cost the host
  graph       one replay of a CUDA graph captured around the call, between two events: the device time + one launch
  queued      100 graph replays back to back between two events, / 100: device time with launch hidden
  kernels     the summed device time of the call's kernels (torch.profiler)

and records what could differ between processes: the kernels chosen (names), the CPU the process ran on, the SM
clock during the timed calls, the weights' addresses modulo 2 MiB.

    python benchmarks/spread_probe.py --processes 8 > spread.txt          # the whole table, on a GPU
    python benchmarks/spread_probe.py --child '{"cell": ...}'             # one process (used by the above)
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CELLS = [  # (name, hidden, intermediate, depth, batch, compiled): the crossgen FFN cells of issue 31, 32 tokens a row
    ("ffn-tinyllama eager b1", 2048, 5632, 1, 1, False),
    ("ffn-tinyllama compile b1", 2048, 5632, 1, 1, True),
    ("ffn-tinyllama eager b16", 2048, 5632, 1, 16, False),
    ("ffn-tinyllama compile b16", 2048, 5632, 1, 16, True),
    ("ffn-multilayer-tinyllama eager b1", 2048, 5632, 4, 1, False),
    ("ffn-multilayer-tinyllama compile b1", 2048, 5632, 4, 1, True),
    ("ffn-llama2 eager b1", 4096, 11008, 1, 1, False),
    ("ffn-llama2 compile b1", 4096, 11008, 1, 1, True),
]
WAYS = ("alone", "launch", "graph", "queued", "kernels")


def child(cell: list) -> dict:
    import torch
    from torch import nn

    name, hidden, intermediate, depth, batch, compiled = cell
    torch.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(hidden, intermediate, bias=False), nn.ReLU(), nn.Linear(intermediate, hidden, bias=False)]
    model = nn.Sequential(*layers).cuda().to(torch.bfloat16).eval()
    x = torch.randn(batch, 32, hidden, device="cuda", dtype=torch.bfloat16)
    fn = torch.compile(model) if compiled else model
    out = {"cell": name, "cpu": os.sched_getaffinity(0).__len__(), "pid": os.getpid()}
    with torch.no_grad():
        for _ in range(20):
            fn(x)
        torch.cuda.synchronize()
        alone, launch = [], []
        for _ in range(50):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            begin = time.perf_counter()
            fn(x)
            launch.append((time.perf_counter() - begin) * 1e3)
            end.record()
            end.synchronize()
            alone.append(start.elapsed_time(end))
        out["cpu_core"] = _core()
        out["sm_mhz"] = _sm_clock()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                fn(x)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn(x)
        for _ in range(10):
            graph.replay()
        torch.cuda.synchronize()
        replay = []
        for _ in range(50):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            replay.append(start.elapsed_time(end))
        queued = []
        for _ in range(5):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(100):
                graph.replay()
            end.record()
            end.synchronize()
            queued.append(start.elapsed_time(end) / 100)
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(20):
                fn(x)
            torch.cuda.synchronize()
        kernels = [e for e in prof.events() if e.device_type.name == "CUDA"]
        out["kernel_names"] = sorted({e.name[:60] for e in kernels})
        out["kernels"] = sum(e.device_time for e in kernels) / 20 / 1e3  # us -> ms per call
    out.update(alone=statistics.median(alone), launch=statistics.median(launch), graph=statistics.median(replay),
               queued=statistics.median(queued))
    out["weight_offsets_kib"] = sorted({(p.data_ptr() % (1 << 21)) >> 10 for p in model.parameters()})[:4]
    out["input_offset_kib"] = (x.data_ptr() % (1 << 21)) >> 10
    return out


def _core() -> int:
    with open(f"/proc/{os.getpid()}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[36])


def _sm_clock() -> int:
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetClockInfo(pynvml.nvmlDeviceGetHandleByIndex(0), pynvml.NVML_CLOCK_SM)
    except Exception:
        return -1


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--child")
    parser.add_argument("--json-out")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    rows: dict[str, list[dict]] = {cell[0]: [] for cell in CELLS}
    for index in range(args.processes):
        for cell in CELLS:
            done = subprocess.run([sys.executable, __file__, "--child", json.dumps(cell)], capture_output=True,
                                  text=True, check=True)
            rows[cell[0]].append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(f"round {index + 1}/{args.processes} done", file=sys.stderr, flush=True)
        if args.json_out:  # after every round: a call stopped at its limit keeps what it measured
            with open(args.json_out, "w") as handle:
                json.dump(rows, handle, indent=1)
    print(f"{'cell':38} {'way':8} {'process medians, ms':>60} {'max/min':>8}")
    for name, processes in rows.items():
        if not processes:
            continue
        for way in WAYS:
            values = [p[way] for p in processes]
            print(f"{name:38} {way:8} {' '.join(f'{v:.4f}' for v in values):>60} {max(values) / min(values):8.2f}")
        kernel_sets = {tuple(p["kernel_names"]) for p in processes}
        print(f"{name:38} kernel sets {len(kernel_sets)}; cores {[p['cpu_core'] for p in processes]}; "
              f"sm MHz {sorted({p['sm_mhz'] for p in processes})}; weight offsets KiB "
              f"{[p['weight_offsets_kib'][0] for p in processes]}")


if __name__ == "__main__":
    main()
