"""The host/worker exchange, defined once: a worker's exchange folder, its command line (built by the host, parsed by
the worker), the JSON Lines rule both sides read and write by, the default cache folder, the switch of the worker's
reference cache, and the sweep id that tags both the stored rows and the workers (containers) of a sweep."""

import argparse
import os
import socket
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal, Optional, Sequence

from pydantic import BaseModel, Field

from mlcbench.schema.base import StrictModel

WORKER_MODULE = "mlcbench.workers"
WORKER_COMMAND = "run"
JOBS_FILE = "jobs.jsonl"  # JobSpec lines, written by the host before the worker starts
RESULTS_FILE = "results.jsonl"  # Result lines, appended and flushed by the worker as each job ends
PROGRESS_FILE = "progress.txt"  # the id of each job as the worker starts it (per-job timeouts)
LOG_FILE = "worker.log"  # the worker's stdout and stderr
# the digest of the image a container worker runs in (compiler caches are keyed by it); unset for the local env
IMAGE_DIGEST_ENV = "MLCBENCH_IMAGE_DIGEST"
# the pid of the orchestrator that started a local worker: a worker whose parent is another already was orphaned
ORCHESTRATOR_PID_ENV = "MLCBENCH_ORCHESTRATOR_PID"
# "0": the worker computes eager's reference in every process and caches none (the cache's side-by-side bias check)
REFERENCE_CACHE_ENV = "MLCBENCH_REFERENCE_CACHE"
CALIBRATION_FILE = "calibration.json"  # the device's measured ceilings, written before the first job when asked
# when the host asked for this worker (seconds since the epoch): its start-up is timed from there (ProcessTiming)
LAUNCHED_AT_ENV = "MLCBENCH_LAUNCHED_AT"
# a folder the workers sharing one GPU (a sweep's --overlap) time through one at a time (workers/measurement/gate.py)
TIMING_GATE_ENV = "MLCBENCH_TIMING_GATE"
GATE_LOCK = "lock"  # below the gate: held (flock) by the worker whose window is open
GATE_MEMBERS = "members"  # below the gate: a file per worker, named by its pid, holding its process group
GATE_LOG = "windows.jsonl"  # below the gate: one line per window, {"pid", "opened", "closed"} (seconds since the epoch)
# how the worker's interpreter came to be (Startup): set by the host, or by the zygote in the children it forks
STARTUP_ENV = "MLCBENCH_STARTUP"
# the pre-imported interpreter that forks one fresh worker per request, for workers of one cache folder:
# `python -m mlcbench.workers zygote CACHE_DIR`
ZYGOTE_COMMAND = "zygote"
# persistent compiler caches (one folder per env below it), where neither the sweep nor the worker is told another:
# MLCBENCH_CACHE_DIR where set (the tests set it, so that they never touch a user's caches), else ~/.cache/mlcbench
CACHE_DIR_VARIABLE = "MLCBENCH_CACHE_DIR"
DEFAULT_CACHE_DIR = Path(os.environ.get(CACHE_DIR_VARIABLE) or Path.home() / ".cache" / "mlcbench")
# JSON's own whitespace: a line of only these is blank
_JSON_WHITESPACE = " \t\r"


def encode_line(model: BaseModel) -> str:
    """A model as one JSON Lines line. JSON escapes a newline inside a string, so the only b"\\n" is the last."""
    return model.model_dump_json() + "\n"


def complete_lines(data: bytes) -> tuple[list[str], int]:
    """The non-blank lines that `data` completes, and how many bytes they span (a partial last line waits for its
    newline). A line ends at b"\\n" only: str.splitlines() also ends one at U+2028, U+2029, U+0085, \\r ..., which
    JSON leaves raw inside a string, and so would cut one result in two."""
    end = data.rfind(b"\n") + 1
    lines = data[:end].decode("utf-8", "replace").split("\n")
    return [line for line in lines if line.strip(_JSON_WHITESPACE)], end


def read_lines(path: Path) -> list[str]:
    """The complete, non-blank lines of a JSON Lines file."""
    return complete_lines(path.read_bytes())[0]


class WorkerArgs(StrictModel):
    """The worker's command line: `python -m mlcbench.workers run --jobs ... --results ...`."""

    jobs: Path = Field(description="the JobSpec lines to run")
    results: Path = Field(description="append one Result line per job here")
    progress: Optional[Path] = Field(None, description="append each job's id here as it starts (per-job timeouts)")
    cache_dir: Path = Field(DEFAULT_CACHE_DIR, description="persistent compiler caches, a folder per workflow")
    calibration: Optional[Path] = Field(None, description="first measure the device's ceilings and write them here")

    def command(self, python: str) -> list[str]:
        flags = [[_flag(name), str(value)] for name, value in self if value is not None]
        return [python, "-m", WORKER_MODULE, WORKER_COMMAND, *(part for flag in flags for part in flag)]

    @classmethod
    def parse(cls, argv: Optional[Sequence[str]] = None) -> "WorkerArgs":
        """The arguments after `python -m mlcbench.workers` (argv None: sys.argv's); a wrong one exits 2 with usage."""
        parser = argparse.ArgumentParser(prog=f"python -m {WORKER_MODULE}", description="mlcbench worker")
        commands = parser.add_subparsers(dest="command", required=True)
        run = commands.add_parser(WORKER_COMMAND, help="run every job of a JSONL file, appending one Result line per "
                                                       "job")
        for name, field in cls.model_fields.items():
            run.add_argument(_flag(name), dest=name, type=Path, required=field.is_required(),
                             default=None if field.is_required() else field.default, help=field.description)
        parsed = vars(parser.parse_args(argv))
        parsed.pop("command")
        return cls(**parsed)


def _flag(field: str) -> str:
    return "--" + field.replace("_", "-")


def worker_command(python: str, folder: str, cache_dir: str, calibrate: bool = False) -> list[str]:
    """The worker's command line, for an exchange folder and a cache folder as the worker sees them; `calibrate`:
    measure the device's ceilings first (once per GPU per sweep)."""
    return WorkerArgs(jobs=Path(folder, JOBS_FILE), results=Path(folder, RESULTS_FILE),
                      progress=Path(folder, PROGRESS_FILE), cache_dir=Path(cache_dir),
                      calibration=Path(folder, CALIBRATION_FILE) if calibrate else None).command(python)


# exec: a new interpreter per worker process; fork: a child forked, before CUDA is touched, from a pre-imported
# interpreter (the zygote) that a sweep starts afresh for each round of a GPU's cells, so that each process of a cell
# comes from another interpreter (its own memory layout and hash seed)
Startup = Literal["exec", "fork"]


class ForkRequest(StrictModel):
    """The host asks a zygote for one worker: the worker's arguments (WorkerArgs.command after the module), its
    working folder, its log file and what its environment adds to the zygote's."""

    argv: list[str]
    cwd: Path
    log: Path
    env: dict[str, str] = {}


class ZygoteEvent(StrictModel):
    """A zygote's answer, one JSON line each: ready (with what importing its modules cost, or why it cannot fork),
    a worker forked, a worker ended (its exit code as subprocess gives it: negative for a signal)."""

    ready: Optional[bool] = None
    preload_s: Optional[float] = None
    unsafe: Optional[str] = None
    forked: Optional[int] = None
    exited: Optional[int] = None
    exit_code: Optional[int] = None


def zygote_command(python: str, cache_dir: str) -> list[str]:
    """The zygote's command line, for the cache folder of the workers it forks (their caches' variables are set
    before it imports torch)."""
    return [python, "-m", WORKER_MODULE, ZYGOTE_COMMAND, cache_dir]


def new_sweep_id() -> str:
    # microseconds: two sweeps of one process (the API, tests) in the same second differ
    return f"{socket.gethostname()}-{os.getpid()}-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%S%f')}"
