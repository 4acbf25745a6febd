"""The host/worker exchange, defined once: a worker's exchange folder, its command line, and the sweep id that tags
both the stored rows and the workers (containers) of a sweep."""

import os
import socket
from datetime import datetime, timezone

WORKER_MODULE = "mlcbench.workers"
JOBS_FILE = "jobs.jsonl"  # JobSpec lines, written by the host before the worker starts
RESULTS_FILE = "results.jsonl"  # Result lines, appended and flushed by the worker as each job ends
PROGRESS_FILE = "progress.txt"  # the id of each job as the worker starts it (per-job timeouts)
LOG_FILE = "worker.log"  # the worker's stdout and stderr
# the digest of the image a container worker runs in (compiler caches are keyed by it); unset for the local env
IMAGE_DIGEST_ENV = "MLCBENCH_IMAGE_DIGEST"
CALIBRATION_FILE = "calibration.json"  # the device's measured ceilings, written before the first job when asked


def worker_command(python: str, folder: str, cache_dir: str, calibrate: bool = False) -> list[str]:
    """The worker's command line, for an exchange folder and a cache folder as the worker sees them; `calibrate`:
    measure the device's ceilings first (once per GPU per sweep)."""
    return [python, "-m", WORKER_MODULE, "run",
            "--jobs", f"{folder}/{JOBS_FILE}",
            "--results", f"{folder}/{RESULTS_FILE}",
            "--progress", f"{folder}/{PROGRESS_FILE}",
            "--cache-dir", cache_dir,
            *(["--calibration", f"{folder}/{CALIBRATION_FILE}"] if calibrate else [])]


def new_sweep_id() -> str:
    # microseconds: two sweeps of one process (the API, tests) in the same second differ
    return f"{socket.gethostname()}-{os.getpid()}-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%S%f')}"
