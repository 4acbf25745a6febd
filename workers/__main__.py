import faulthandler
import sys

from mlcbench.schema.protocol import ZYGOTE_COMMAND, WorkerArgs
from mlcbench.workers.exchange import JobFileError, read_jobs
from mlcbench.workers.orphan import exit_with_parent
from mlcbench.workers.runner import run_jobs, write_calibration


def main(argv: list[str] | None = None) -> int:
    if (sys.argv[1:] if argv is None else argv)[:1] == [ZYGOTE_COMMAND]:
        from mlcbench.workers.zygote import serve

        return serve()
    args = WorkerArgs.parse(argv)
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
