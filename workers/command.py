"""The worker's command, `python -m mlcbench.workers run ...` (schema/protocol.py WorkerArgs): run every job of a
job file, appending one Result line per job. A zygote's children (workers/zygote.py) run it too, without a new
interpreter."""

import faulthandler
import sys
from typing import Optional

from mlcbench.schema.protocol import WorkerArgs
from mlcbench.workers.cache_environment import use_cache_folder_only
from mlcbench.workers.exchange import JobFileError, read_jobs
from mlcbench.workers.orphan import exit_with_parent
from mlcbench.workers.runner import run_jobs, write_calibration


def run(argv: Optional[list[str]] = None) -> int:
    args = WorkerArgs.parse(argv)
    use_cache_folder_only(args.cache_dir)
    try:
        jobs = read_jobs(args.jobs)
    except JobFileError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    exit_with_parent()
    faulthandler.enable()  # a segfault in a compiler or runtime leaves its Python stack in the log tail
    if args.calibration is not None and jobs:
        write_calibration(args.calibration, jobs[0].device, args.cache_dir)
    run_jobs(jobs, args.results, args.cache_dir, args.progress)
    return 0
