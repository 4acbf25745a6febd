import argparse
import faulthandler
import sys
from pathlib import Path

from mlcbench.schema.protocol import WORKER_MODULE
from mlcbench.workers.orphan import exit_with_parent
from mlcbench.workers.protocol import JobFileError, read_jobs
from mlcbench.workers.runner import run_jobs, write_calibration


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {WORKER_MODULE}", description="mlcbench worker")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run every job of a JSONL file, appending one Result line per job")
    run.add_argument("--jobs", type=Path, required=True)
    run.add_argument("--results", type=Path, required=True)
    run.add_argument("--cache-dir", type=Path, default=Path.home() / ".cache" / "mlcbench")
    run.add_argument("--progress", type=Path, help="append each job's id here as it starts (for per-job timeouts)")
    run.add_argument("--calibration", type=Path, help="first measure the device's ceilings and write them here")
    args = parser.parse_args(argv)

    try:
        jobs = read_jobs(args.jobs)
    except JobFileError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    exit_with_parent()
    faulthandler.enable()  # a segfault in a compiler or runtime leaves its Python stack in the log tail
    if args.calibration is not None and jobs:
        write_calibration(args.calibration, jobs[0].device)
    run_jobs(jobs, args.results, args.cache_dir, args.progress)
    return 0


if __name__ == "__main__":
    sys.exit(main())
