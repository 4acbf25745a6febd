"""The worker processes a sweep left running, found by their command lines (shared by the kill-and-resume test and
tests/bench/kill_sweep.py)."""

from pathlib import Path

from mlcbench.schema.protocol import WORKER_MODULE


def is_worker(command: list[bytes], workdir: Path) -> bool:
    """A worker of a sweep under workdir: `python -m mlcbench.workers ...` with a file under workdir among its
    arguments (the module is named whole: a bare `workers` argument matched no worker, so no worker was ever seen)."""
    return b"-m" in command and WORKER_MODULE.encode() in command and any(
        str(workdir).encode() in part for part in command)


def workers_left(workdir: Path) -> list[int]:
    """Pids of live worker processes started for a sweep under workdir."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            command = (proc / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        if is_worker(command, workdir):
            pids.append(int(proc.name))
    return pids
