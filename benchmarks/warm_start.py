"""Cold against warm compile of a compiled LLM workflow, each job in a fresh Python process (as a sweep's worker runs
it), and whether torch's mega-cache (`torch.compiler.save_cache_artifacts` / `load_cache_artifacts`) adds anything to
the caches the workflow already keeps (Inductor's and dynamo's precompile cache, workers/stacks/inductor_cache.py):

    cold         an empty cache folder
    warm         the folder the cold process left
    warm+mega    the same, with the cold process's mega-cache artifacts loaded into it first
    mega only    an empty folder, into which the artifacts are loaded first (the caches carried as one file)

The artifacts are loaded right after the job's cache folder is set (where a workflow would load them), so they land
in the folder the compile reads.

    python benchmarks/warm_start.py --workflow torch_compile_decode,torch_compile_static [--model llama-2layer]
        [--scenarios cold,warm] [--repeats 2] [--warm-env NAME=VALUE ...] [--json rows.json] [--log-dir logs/]
        [--profile-dir profiles/]

Each row carries phases_s: the phases torch times itself (dynamo_timed), the 20 longest, summed over the process.

A warm scenario of `--warm-env WARM_START_WITHOUT=keep_tuned_configs` runs without that one of the worker's cache
measures (inductor_cache's context managers, or hash_installs_ahead; several joined by "+"): its ablation in the same
folder.

With --cold-repeats above 1 the further cold processes (each compiling into an empty folder of its own) take turns with
the warm ones, and each warm scenario's calls are held to the cold ones as a sweep holds a cell's (stats.combine_cell:
one series where a test finds no difference, else two), each series with its interval.
--cache-root keeps the folders (cold's is cache/) for a look after the run.

--profile-dir writes each warm process's cProfile (top functions by cumulative and by own time). Compile threads
blur it: the H100 profiles of 2026-11-26 (Python 3.12) show own times above cumulative ones, so read the call counts
rather than the cumulative times. On the GPU machine, pack the folder into one file before the call ends: a device call
brings back at most 8 files, and on 2026-11-26 the profiles were left out.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

CHILD = r"""
import contextlib, json, os, sys, time
from pathlib import Path
import torch
from mlcbench.schema import JobSpec
from mlcbench.workers.runner import run_job
from mlcbench.workers.stacks import inductor_cache

job, cache_dir, load, save = JobSpec.model_validate_json(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4]
profile = sys.argv[5]
for measure in filter(None, os.environ.get("WARM_START_WITHOUT", "").split("+")):
    getattr(inductor_cache, measure)  # a name that is not one fails here, not silently
    # the install keys then wait for the first compile, as in a torch without the measure
    setattr(inductor_cache, measure, (lambda: None) if measure == "hash_installs_ahead" else contextlib.nullcontext)
loaded = {}
set_folder = inductor_cache.use_cache_folder

def set_folder_and_load(root, device, shape=None):
    folder = set_folder(root, device, shape)
    if load and shape is not None:
        start = time.perf_counter()
        info = torch.compiler.load_cache_artifacts(Path(load).read_bytes())
        loaded.update(load_s=time.perf_counter() - start, artifacts=sum(len(v) for v in info.artifacts.values()))
    return folder

inductor_cache.use_cache_folder = set_folder_and_load
# the seconds of each phase torch times itself (dynamo_timed), kept before the worker's reset after the job clears them
from torch._dynamo.utils import compilation_time_metrics
phases = {}
reset = torch._dynamo.reset

def keep_phases_and_reset():
    for name, times in compilation_time_metrics.items():
        phases[name] = phases.get(name, 0.0) + sum(times)
    reset()

torch._dynamo.reset = keep_phases_and_reset
if profile:
    import cProfile, io, pstats
    profiler = cProfile.Profile()
    result = profiler.runcall(run_job, job, cache_dir)
    text = io.StringIO()
    for order in ("cumulative", "tottime"):
        pstats.Stats(profiler, stream=text).sort_stats(order).print_stats(60)
    # where a warm start's own phases go, one level down
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_callees(
        r"\(precompile\)|_precompile_config|build_guards|load_by_key_path|_make_launchers|triton_heuristics.py.*\(triton\)")
    # and who hashes what (Triton's and torch's keys of their own installs)
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_callers(
        r"update' of '_hashlib|triton_key|torch_key|get_code_hash|triton_hash_with_backend")
    Path(profile).write_text(text.getvalue())
else:
    result = run_job(job, cache_dir)
if save:
    Path(save).write_bytes(torch.compiler.save_cache_artifacts()[0])
metrics = result.metrics
keep_phases_and_reset()
longest = sorted(phases.items(), key=lambda item: -item[1])[:20]
print(json.dumps({"status": result.status, "passed": result.correctness.passed if result.correctness else None,
                  "compile_s": metrics.compile_s, "compile_cache": metrics.compile_cache,
                  "compiler_import_s": metrics.compiler_import_s,
                  **{name: metrics.settings.get(name) for name in ("prepare_s", "first_call_s", "dynamo_trace_s",
                                                                   "backend_s")},
                  "median_call_ms": metrics.latency.median_ms if metrics.latency else None,
                  "method": metrics.latency.method if metrics.latency else None,
                  "install_keys_s": metrics.settings.get("install_keys_s"), "load_s": metrics.load_s,
                  "processes": [process.model_dump(mode="json") for process in metrics.worker_processes()], **loaded,
                  "phases_s": {name: round(seconds, 3) for name, seconds in longest}}))
"""


def run(job_json: str, cache_dir: Path, load: str = "", save: str = "", profile: str = "",
        env: Optional[dict[str, str]] = None, log: Optional[Path] = None) -> dict:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CHILD, job_json, str(cache_dir), load, save, profile],
                          capture_output=True, text=True, env={**os.environ, **(env or {})})
    wall = time.perf_counter() - start
    if log is not None:
        log.write_text(done.stderr)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        raise RuntimeError(f"child failed ({done.returncode}): {done.stderr[-2000:]}")
    return {**json.loads(lines[-1]), "process_s": round(wall, 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workflow", default="torch_compile_decode,torch_compile_static")
    parser.add_argument("--model", default="llama-2layer")
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--output-len", type=int, default=8)
    parser.add_argument("--scenarios", default="cold,warm,warm+mega,mega only",
                        help="which to run (cold always runs: the others need its caches and artifacts)")
    parser.add_argument("--repeats", type=int, default=2, help="warm processes per scenario")
    parser.add_argument("--cold-repeats", type=int, default=1,
                        help="cold processes, each into an empty folder (the warm ones read the first's): more than "
                             "one gives the cold calls an interval to hold the warm calls to")
    parser.add_argument("--json", type=Path, help="the rows so far, rewritten after each process")
    parser.add_argument("--warm-env", action="append", default=[], metavar="NAME=VALUE[,NAME=VALUE]",
                        help="one more warm scenario (repeated --repeats times) whose processes run with these "
                             "environment variables, e.g. TORCHINDUCTOR_COMPILE_THREADS=1; repeat the flag for more")
    parser.add_argument("--log-dir", type=Path,
                        help="keep each process's stderr here (with PYTHONPROFILEIMPORTTIME=1 in --warm-env: where "
                             "its imports' time went)")
    parser.add_argument("--cache-root", type=Path,
                        help="an empty folder for the cache folders, kept after the run (default: a temporary one)")
    parser.add_argument("--profile-dir", type=Path,
                        help="profile each warm process's job (cProfile): its top functions, by cumulative and by own "
                             "time, in a text file here")
    args = parser.parse_args()
    from mlcbench.schema import MODELS, JobSpec

    rows = []
    for workflow in args.workflow.split(","):
        job = JobSpec(model=args.model, workflow=workflow, precision=MODELS[args.model].default_precision,
                      batch_size=args.batch_size, output_len=args.output_len, device=args.device, warmup=1,
                      repeats=3)
        with tempfile.TemporaryDirectory() as folder:
            root = Path(folder) if args.cache_root is None else args.cache_root / workflow
            root.mkdir(parents=True, exist_ok=True)
            mega = str(root / "mega.bin")
            scenarios = [("cold", root / "cache", "", mega, {})]
            # the further cold processes compile into folders of their own, which nothing reads after them
            further_cold = [("cold", root / f"cold{index}", "", "", {}) for index in range(1, args.cold_repeats)]
            wanted = args.scenarios.split(",")
            with_env = [(f"warm {variables}", dict(pair.split("=", 1) for pair in variables.split(",")))
                        for variables in args.warm_env]
            # the later scenarios interleaved, one process of each in turn: a drift of the machine meets them all
            for index in range(max(args.repeats, len(further_cold))):
                if index < args.repeats:
                    later = [("warm", root / "cache", "", "", {}), ("warm+mega", root / "cache", mega, "", {}),
                             ("mega only", root / f"empty{index}", mega, "", {})]
                    scenarios += [scenario for scenario in later if scenario[0] in wanted]
                    scenarios += [(name, root / "cache", "", "", env) for name, env in with_env]
                scenarios += further_cold[index:index + 1]
            for index, (scenario, cache_dir, load, save, env) in enumerate(scenarios):
                profile = ""
                if args.profile_dir and scenario != "cold":
                    args.profile_dir.mkdir(parents=True, exist_ok=True)
                    profile = str(args.profile_dir / f"{workflow}-{index}-{scenario.replace(' ', '_')}.txt")
                log = None
                if args.log_dir:
                    args.log_dir.mkdir(parents=True, exist_ok=True)
                    log = args.log_dir / f"{workflow}-{index}-{scenario.split()[0]}.txt"
                row = {"workflow": workflow, "scenario": scenario,
                       **run(job.model_dump_json(), cache_dir, load, save, profile, env, log)}
                if save:
                    row["mega_bytes"] = Path(mega).stat().st_size
                print(json.dumps(row), flush=True)
                rows.append(row)
                if args.json:
                    args.json.write_text(json.dumps(rows, indent=1))
    for verdict in cold_against_warm(rows):
        print(json.dumps(verdict), flush=True)
    return 0


def cold_against_warm(rows: list[dict]) -> list[dict]:
    """Per workflow and warm scenario, its processes' calls held to the cold processes' as a sweep's cell holds them
    (stats.combine_cell): the series the figure would take, and each series's median call with its 95 % interval."""
    from mlcbench.orchestrator import stats
    from mlcbench.schema import ProcessTiming

    def timed(workflow: str, scenario: str) -> list[ProcessTiming]:
        return [ProcessTiming.model_validate(process) for row in rows
                if row["workflow"] == workflow and row["scenario"] == scenario for process in row["processes"]]

    method = next(row["method"] for row in rows)

    def figure(processes: list[ProcessTiming]) -> dict:
        timing = stats.combine(processes, method, 0.02)
        return {"n": len(processes), "median_ms": round(timing.median_ms, 2),
                "interval_ms": [round(timing.ci_low_ms, 2), round(timing.ci_high_ms, 2)]
                if timing.ci_low_ms is not None else None}

    verdicts = []
    for workflow in dict.fromkeys(row["workflow"] for row in rows):
        cold = timed(workflow, "cold")
        for scenario in dict.fromkeys(row["scenario"] for row in rows if row["workflow"] == workflow):
            warm = timed(workflow, scenario)
            if scenario == "cold" or not cold or not warm:
                continue
            series = stats.combine_cell(cold + warm, method, 0.02).series
            verdicts.append({"workflow": workflow, "warm scenario": scenario, "series": series,
                             "cold": figure(cold), "warm": figure(warm)})
    return verdicts


if __name__ == "__main__":
    sys.exit(main())
