"""Where the time of one compiled decode step goes (torch_compile_decode's loop, or with `--workflow
handtuned_decode` mlcbench's kernels that its `--options` turn on): kernels per step, GPU time in GEMMs,
in Inductor's own kernels and elsewhere, and the gaps between kernels, against the memory bound of a step (weights +
KV cache over a device-to-device copy's bandwidth measured here, and the catalog's).

    python benchmarks/decode_profile.py --model tinyllama-1.1b --batch-size 1,64 [--json out.json]
        [--options '{"fused_projections": false}' --options '{"pdl": true}' ...]

Each `--options` (the workflow's options, as JSON; default: none set) is one variant, prepared by the
workflow itself (its prepare_llm, inside its compiling block). Each compiles cold, into a cache folder
of its own, unless `--cache-dir` names an env's cache folder (a sweep's: its packages then load, as a warm worker
process's do). Kernel names come from a torch.profiler trace of
31 CUDA-graph replays.
"""

import argparse
import itertools
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from mlcbench.schema import GPUS, MODELS, JobSpec, gpu_tag_for_name
from mlcbench.workers.decode.compiled_step import CompiledStepRunner, pdl_unavailable
from mlcbench.workers.interface import Unsupported, WorkflowContext
from mlcbench.workers.models import llm
from mlcbench.workers.workflows import load

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
GEMM = re.compile(r"gemm|gemv|nvjet|cutlass|xmma|cublas|splitk", re.IGNORECASE)


def copy_bandwidth_gbs(megabytes: int = 1024) -> float:
    """Bytes read + written per second by a device-to-device copy (the figure facts.md quotes)."""
    source = torch.empty(megabytes << 20, dtype=torch.uint8, device="cuda")
    target = torch.empty_like(source)
    times = []
    for _ in range(12):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        target.copy_(source)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return 2 * source.numel() / (statistics.median(times[2:]) * 1e-3) / 1e9


def kernel_events(trace_path: Path) -> list[dict]:
    events = json.loads(trace_path.read_text())["traceEvents"]
    return sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"])


def summarize(kernels: list[dict], steps: int, wall_ms: float) -> dict:
    by_kind = {"gemm": 0.0, "inductor": 0.0, "other": 0.0}
    by_name: dict[str, list[float]] = {}
    for kernel in kernels:
        name, duration = kernel["name"], kernel["dur"] / 1e3
        kind = "gemm" if GEMM.search(name) else "inductor" if name.startswith("triton") else "other"
        by_kind[kind] += duration
        by_name.setdefault(name, []).append(duration)
    busy = sum(by_kind.values())
    gaps = [max(0.0, (b["ts"] - (a["ts"] + a["dur"])) / 1e3) for a, b in zip(kernels, kernels[1:])]
    top = sorted(by_name.items(), key=lambda item: -sum(item[1]))[:12]
    return {
        "step_ms": wall_ms / steps,
        "kernels_per_step": len(kernels) / steps,
        "gpu_busy_ms_per_step": busy / steps,
        "gemm_ms_per_step": by_kind["gemm"] / steps,
        "inductor_ms_per_step": by_kind["inductor"] / steps,
        "other_ms_per_step": by_kind["other"] / steps,
        "gaps_ms_per_step": sum(gaps) / steps,
        "median_gap_us": statistics.median(gaps) * 1e3 if gaps else None,
        "top_kernels": [{"name": name[:100], "calls_per_step": len(times) / steps, "ms_per_step": sum(times) / steps}
                        for name, times in top],
    }


def profile_steps(runner: CompiledStepRunner, prompt: torch.Tensor, steps: int, trace_path: Path) -> float:
    """Wall milliseconds of `steps` decode steps (CUDA events), traced into trace_path. A whole generation first, so
    that the step's CUDA graph is recorded before the trace starts (its recording inflated the step time otherwise);
    the loop then replays it as the runner does (a new step marked, outputs copied before the next replay)."""
    model, eos = runner.model, runner.eos_ids
    runner.generate(prompt, steps + 1)
    token, _ = runner.prefill(model, prompt, eos)
    position = torch.full((1,), prompt.shape[1], dtype=torch.long, device="cuda")
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as profiler:
        start.record()
        for _ in range(steps):
            torch.compiler.cudagraph_mark_step_begin()
            token, position, _ = runner.step(model, token, position, eos)
            token, position = token.clone(), position.clone()
        end.record()
        torch.cuda.synchronize()
    profiler.export_chrome_trace(str(trace_path))
    return start.elapsed_time(end)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tinyllama-1.1b", choices=[m for m, i in MODELS.items() if i.kind == "llm"])
    parser.add_argument("--batch-size", type=lambda text: [int(size) for size in text.split(",")], action="extend",
                        help="comma-separated or repeated (default 1)")
    parser.add_argument("--input-len", type=int, default=32)
    parser.add_argument("--output-len", type=int, default=32)
    parser.add_argument("--workflow", default="torch_compile_decode", choices=["torch_compile_decode", "handtuned_decode"])
    parser.add_argument("--options", type=json.loads, action="append",
                        help="one variant's workflow options as a JSON object (repeatable; default: the workflow's "
                             "defaults)")
    parser.add_argument("--cache-dir", type=Path,
                        help="an env's cache folder, as a sweep's worker gets it, to compile into and load from "
                             "(default: a new one per variant)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("error: decode_profile needs a CUDA GPU", file=sys.stderr)
        return 1
    why_no_pdl = pdl_unavailable(torch.device("cuda"))
    if why_no_pdl and any(options.get("pdl") for options in args.options or []):
        print(f"error: {why_no_pdl}", file=sys.stderr)
        return 1
    info = MODELS[args.model]
    gpu_name = torch.cuda.get_device_name()
    peaks = GPUS.get(gpu_tag_for_name(gpu_name) or "")
    measured_gbs = copy_bandwidth_gbs()
    if hasattr(torch.profiler, "_utils") and hasattr(torch.profiler._utils, "_init_for_cuda_graphs"):
        torch.profiler._utils._init_for_cuda_graphs()  # lets the profiler see kernels inside CUDA graphs
    report = {"model": args.model, "gpu": gpu_name, "torch": torch.__version__,
              "copy_bandwidth_gbs": measured_gbs, "catalog_bandwidth_gbs": peaks.bandwidth_gbs if peaks else None,
              "variants": {}}
    for options, batch in itertools.product(args.options or [{}], args.batch_size or [1]):
        job = JobSpec(model=args.model, workflow=args.workflow, precision=info.default_precision,
                      batch_size=batch, input_len=args.input_len, output_len=args.output_len, options=options)
        variant = job.options.non_default() or "default"
        with tempfile.TemporaryDirectory() as fresh, torch.no_grad():
            device, workflow = torch.device("cuda"), load(job.workflow)
            cache = args.cache_dir / workflow.name if args.cache_dir else Path(fresh)  # a sweep's layout
            ctx = WorkflowContext(job, device, DTYPES[job.precision], cache)
            hf_model = llm.build(info, job, ctx.dtype, device)
            prompt = llm.prompt_ids(info, job, device)
            with workflow.compiling(ctx):
                try:
                    prepared = workflow.prepare_llm(hf_model, ctx)
                except Unsupported as refused:
                    print(f"{args.model} b{batch} [{variant}]: {refused}")
                    continue
                runner = prepared.runner
                start = time.perf_counter()
                for _ in range(3):  # compile (or load from the cache), record the CUDA graphs
                    runner.generate(prompt, args.output_len)
                first_calls_s = time.perf_counter() - start
            trace = Path(fresh) / "trace.json"
            steps = args.output_len - 1
            wall_ms = profile_steps(runner, prompt, steps, trace)
            figures = summarize(kernel_events(trace), steps, wall_ms)
        step_bytes = info.decode_step_bytes(job.precision, batch, args.input_len + args.output_len // 2)
        figures["bytes_per_step_gb"] = step_bytes / 1e9
        figures["bound_ms_measured_copy"] = step_bytes / (measured_gbs * 1e9) * 1e3
        figures["fraction_of_bound"] = figures["bound_ms_measured_copy"] / figures["step_ms"]
        figures["first_three_calls_s"] = first_calls_s  # the compile, or the load from the caches, included
        report["variants"].setdefault(variant, {})[batch] = figures
        print(f"{args.model} b{batch} [{variant}]: step {figures['step_ms']:.3f} ms, bound {figures['bound_ms_measured_copy']:.3f} "
              f"ms ({step_bytes / 1e9:.2f} GB at {measured_gbs:.0f} GB/s copy); {figures['kernels_per_step']:.0f} "
              f"kernels/step; GEMM {figures['gemm_ms_per_step']:.3f} ms, Inductor {figures['inductor_ms_per_step']:.3f}"
              f" ms, other {figures['other_ms_per_step']:.3f} ms, gaps {figures['gaps_ms_per_step']:.3f} ms")
        for kernel in figures["top_kernels"]:
            print(f"    {kernel['ms_per_step']:.4f} ms  x{kernel['calls_per_step']:.0f}  {kernel['name']}")
        figures["compile_mode"] = prepared.applied.compile_mode
        del runner, prepared, hf_model
        torch._dynamo.reset()
        torch.cuda.empty_cache()
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
