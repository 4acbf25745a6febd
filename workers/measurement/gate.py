"""One GPU shared by several workers (a sweep's --overlap): their compiles overlap, their timed windows never do.
A worker that is about to time takes the gate's lock, stops every other worker registered at the gate (SIGSTOP to its
process group: its compilers too), waits for the GPU work they had queued to drain, times, and lets them go on. Each
window's edges go to the gate's log, from which a worker counts the time it stood stopped. The host resumes every
member after each worker ends, so a worker killed inside its window leaves no neighbour stopped."""

import fcntl
import json
import os
import signal
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator, Optional

from mlcbench.schema.protocol import GATE_LOCK, GATE_LOG, GATE_MEMBERS, TIMING_GATE_ENV
from mlcbench.schema.results import TimedWindow

# GPU work a stopped neighbour had queued before the stop still runs: a stopped process launches nothing more, and
# what one queues between two synchronisations (a build's initialisers, a warm-up call) runs well under this
DRAIN_S = 0.3


class Gate:
    def __init__(self, folder: Path):
        self.folder = folder
        (folder / GATE_MEMBERS).mkdir(parents=True, exist_ok=True)

    @classmethod
    def from_environment(cls) -> Optional["Gate"]:
        folder = os.environ.get(TIMING_GATE_ENV)
        return cls(Path(folder)) if folder else None

    def join(self) -> None:
        """Register this process's group (the worker leads its own: the host starts it in a session of its own)."""
        (self.folder / GATE_MEMBERS / str(os.getpid())).write_text(str(os.getpgid(0)), encoding="utf-8")

    def leave(self) -> None:
        (self.folder / GATE_MEMBERS / str(os.getpid())).unlink(missing_ok=True)

    @contextmanager
    def exclusive(self, drain: bool) -> Iterator[list[TimedWindow]]:
        """The GPU alone through the block; yields a list that holds the window's record once the block ends."""
        held: list[TimedWindow] = []
        asked = time.time()
        with open(self.folder / GATE_LOCK, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                stopped = signal_members(self.folder, signal.SIGSTOP, but=os.getpgid(0))
                if drain and stopped:
                    time.sleep(DRAIN_S)
                opened = time.time()
                try:
                    yield held
                finally:
                    closed = time.time()
                    signal_members(self.folder, signal.SIGCONT, but=os.getpgid(0))
                    with open(self.folder / GATE_LOG, "a", encoding="utf-8") as log:
                        log.write(json.dumps({"pid": os.getpid(), "opened": opened, "closed": closed}) + "\n")
                    held.append(TimedWindow(opened_at=_utc(opened), closed_at=_utc(closed),
                                            waited_s=round(opened - asked, 4), neighbours_stopped=stopped))
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def stopped_s(self, begin: float, end: float) -> float:
        """Seconds of [begin, end] (epoch) in which another member's window was open: this process stood stopped."""
        try:
            lines = (self.folder / GATE_LOG).read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return 0.0
        total = 0.0
        for line in lines:
            window = json.loads(line)
            if window["pid"] != os.getpid():
                total += max(0.0, min(end, window["closed"]) - max(begin, window["opened"]))
        return total


def signal_members(folder: Path, signum: int, but: Optional[int] = None) -> int:
    """Send signum to every registered member's process group but one; how many were alive to receive it."""
    sent = 0
    for member in (folder / GATE_MEMBERS).glob("*"):
        try:
            group = int(member.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if group == but:
            continue
        try:
            os.killpg(group, signum)
            sent += 1
        except ProcessLookupError:  # a member that ended without leaving (killed)
            member.unlink(missing_ok=True)
        except PermissionError:
            continue
    return sent


def _utc(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, timezone.utc)
