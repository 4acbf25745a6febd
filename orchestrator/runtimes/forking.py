"""The host's side of a zygote (workers/zygote.py): start it, ask it for workers, hear when they end."""

import os
import signal
import subprocess
import threading
from pathlib import Path
from typing import Optional

from pydantic import ValidationError

from mlcbench.orchestrator.runtimes.base import LOG_TAIL_CHARS, file_tail
from mlcbench.schema.protocol import ForkRequest, ZygoteEvent, encode_line

# importing torch, Inductor and transformers: seconds on a GPU host, a minute on a loaded 2-core machine
READY_TIMEOUT_S = 600.0
KILL_WAIT_S = 30.0


class ZygoteUnavailable(Exception):
    """The zygote did not start, or found it could not fork fresh workers: start workers as new interpreters."""


class Zygote:
    def __init__(self, command: list[str], env: dict[str, str], log: Path, cwd: Path,
                 cpus: Optional[frozenset[int]] = None):
        self._events: dict[int, Optional[int]] = {}  # pid -> exit code once it ended
        self._pending_pid: Optional[int] = None  # the worker forked for the request in flight
        self._changed = threading.Condition()
        self._ended = False
        with open(log, "ab") as log_file:
            self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log_file,
                                             env=env, cwd=cwd, start_new_session=True)
        if cpus:  # its children, and theirs, inherit it
            os.sched_setaffinity(self._process.pid, cpus)
        self._log = log
        ready = self._read_event(READY_TIMEOUT_S)
        if ready is None or not ready.ready:
            why = ready.unsafe if ready is not None and ready.unsafe else f"no answer; its log: {self._tail()}"
            self.close()
            raise ZygoteUnavailable(why)
        self.preload_s = ready.preload_s
        self._reader = threading.Thread(target=self._listen, name="zygote-events", daemon=True)
        self._reader.start()

    def fork(self, request: ForkRequest) -> "ForkedWorker":
        with self._changed:
            if self._ended:
                raise ZygoteUnavailable("the zygote has ended")
            self._process.stdin.write(encode_line(request).encode())
            self._process.stdin.flush()
            self._changed.wait_for(lambda: self._pending_pid is not None or self._ended, READY_TIMEOUT_S)
            pid, self._pending_pid = self._pending_pid, None
        if pid is None:
            raise ZygoteUnavailable(f"the zygote forked no worker; its log: {self._tail()}")
        return ForkedWorker(self, pid, request.log)

    def exit_code(self, pid: int) -> Optional[int]:
        with self._changed:
            if pid in self._events:
                return self._events[pid]
            if self._ended:  # the zygote died before it could say: the child went with it (or is going)
                return -signal.SIGKILL
            return None

    def wait(self, pid: int, timeout_s: float) -> None:
        with self._changed:
            self._changed.wait_for(lambda: self._events.get(pid) is not None or self._ended, timeout_s)

    def close(self) -> None:
        """No more workers: it ends once those it forked have."""
        if self._process.stdin and not self._process.stdin.closed:
            try:
                self._process.stdin.close()
            except OSError:
                pass

    def kill(self) -> None:
        if self._process.poll() is None:
            os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait()

    def _read_event(self, timeout_s: float) -> Optional[ZygoteEvent]:
        answer: list[Optional[ZygoteEvent]] = [None]

        def read() -> None:
            line = self._process.stdout.readline()
            if line:
                try:
                    answer[0] = ZygoteEvent.model_validate_json(line)
                except ValidationError:
                    pass

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(timeout_s)
        return answer[0]

    def _listen(self) -> None:
        for line in self._process.stdout:
            try:
                event = ZygoteEvent.model_validate_json(line)
            except ValidationError:
                continue
            with self._changed:
                if event.forked is not None:
                    self._events[event.forked] = None
                    self._pending_pid = event.forked
                if event.exited is not None:
                    self._events[event.exited] = event.exit_code
                self._changed.notify_all()
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def _tail(self) -> str:
        return file_tail(self._log)


class ForkedWorker:
    """A worker the zygote forked: in its own process group, as a local worker is."""

    def __init__(self, zygote: Zygote, pid: int, log: Path):
        self._zygote, self._pid, self._log = zygote, pid, log

    def poll(self) -> Optional[int]:
        return self._zygote.exit_code(self._pid)

    def kill(self) -> None:
        if self.poll() is None:
            try:
                os.killpg(self._pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._zygote.wait(self._pid, KILL_WAIT_S)

    def log_tail(self, chars: int = LOG_TAIL_CHARS) -> str:
        return file_tail(self._log, chars)

    def oom_killed(self) -> bool:
        return False
