"""What one worker process records beside its timed calls, printed per cell: the whole-call median, the device time of
a synthetic call (and how: CUDA-graph replay or the profiler, or why neither), an LLM's prefill and per-step time
from its timed calls beside the synchronised TPOT, the clocks read during the timed calls, and the teacher-forced
check (method, steps, worst step).

Run on a GPU machine, each cell in its own process as a sweep would:
  python benchmarks/process_timing.py            (FFN cells eager/torch_compile b1, both LLMs' decode paths b1)
  python benchmarks/process_timing.py CELL ...   (CELL = model:workflow:batch, e.g. ffn-tinyllama:eager:1)"""

import subprocess
import sys
import tempfile
from pathlib import Path

from mlcbench.schema import MODELS, JobSpec, Result

DEFAULT_CELLS = [f"{model}:{workflow}:1" for model in ("ffn-tinyllama", "ffn-llama2", "ffn-multilayer-tinyllama")
                 for workflow in ("eager", "torch_compile")] + [
    f"{model}:{workflow}:1" for model in ("tinyllama-1.1b", "llama2-7b")
    for workflow in ("torch_compile_static", "torch_compile_decode")]


def job(cell: str) -> JobSpec:
    model, workflow, batch = cell.split(":")
    return JobSpec(model=model, workflow=workflow, precision=MODELS[model].default_precision, batch_size=int(batch),
                   device="cuda", warmup=10 if MODELS[model].kind != "llm" else 3,
                   repeats=50 if MODELS[model].kind != "llm" else 10)


def run_in_a_fresh_process(spec: JobSpec, cache_dir: Path) -> Result:
    script = ("import sys\nfrom pathlib import Path\nfrom mlcbench.schema import JobSpec\n"
              "from mlcbench.workers.runner import run_job\n"
              "print(run_job(JobSpec.model_validate_json(sys.stdin.read()), Path(sys.argv[1])).model_dump_json())\n")
    done = subprocess.run([sys.executable, "-c", script, str(cache_dir)], input=spec.model_dump_json(), text=True,
                          capture_output=True, check=True)
    return Result.model_validate_json(done.stdout.strip().splitlines()[-1])


def describe(result: Result) -> str:
    if result.status != "ok" or result.metrics.latency is None:
        return f"{result.status}: {result.reason}"
    latency = result.metrics.latency
    (process,) = latency.processes
    parts = [f"call {latency.median_ms:.3f} ms"]
    if process.device_samples_ms:
        ordered = sorted(process.device_samples_ms)
        parts.append(f"device {ordered[len(ordered) // 2]:.3f} ms ({process.device_method}, n={len(ordered)})")
    for key in ("cuda_graph_capture", "device_time"):
        if key in result.metrics.settings:
            parts.append(f"{key}: {result.metrics.settings[key]}")
    if process.step_ms is not None:
        parts.append(f"prefill {process.prefill_ms:.2f} ms, step {process.step_ms:.3f} ms "
                     f"(synchronised TPOT {result.metrics.tpot_ms:.3f} ms)")
    if process.clocks:
        sm = [reading.sm_mhz for reading in process.clocks if reading.sm_mhz is not None]
        reasons = sorted({reason for reading in process.clocks for reason in reading.reasons})
        parts.append(f"SM {min(sm)}-{max(sm)} MHz over {len(process.clocks)} readings, reasons {reasons or 'none'}")
    check = result.correctness
    if check is not None:
        parts.append(f"check {check.method} passed={check.passed} steps={check.steps_checked} "
                     f"worst_step={check.worst_step} rel_l2={check.rel_l2_error} agree={check.token_agreement}")
    return "; ".join(parts)


def main() -> None:
    cells = sys.argv[1:] or DEFAULT_CELLS
    with tempfile.TemporaryDirectory() as cache_dir:
        for cell in cells:
            print(f"{cell}: {describe(run_in_a_fresh_process(job(cell), Path(cache_dir)))}", flush=True)


if __name__ == "__main__":
    main()
