"""A runtime whose workers only pretend: each job takes a known time and answers `ok`. It exercises the real
scheduling, result following and storing code without torch or a GPU (the scale benchmark, scheduling tests)."""

import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Optional

from mlcbench.orchestrator.runtimes.base import LOG_TAIL_CHARS, Runtime, WorkerFiles
from mlcbench.schema import EnvSpec, JobSpec, Result
from mlcbench.schema.protocol import encode_line, read_lines

KILLED = -9


Answer = Callable[[JobSpec], Optional[Result]]


def answer_ok(job: JobSpec) -> Result:
    return Result(job_id=job.job_id, job=job, status="ok")


class SimulatedWorker:
    def __init__(self, files: WorkerFiles, seconds: Callable[[JobSpec], float], startup_s: float, answer: Answer):
        """answer: the Result the worker writes for a job; None makes the worker die instead."""
        self._files, self._seconds, self._startup_s, self._answer = files, seconds, startup_s, answer
        self._killed = threading.Event()
        self._exit_code: Optional[int] = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        if self._killed.wait(self._startup_s):
            return
        jobs = [JobSpec.model_validate_json(line) for line in read_lines(self._files.jobs)]
        for job in jobs:
            _append(self._files.progress, job.job_id + "\n")
            started = datetime.now(timezone.utc)
            if self._killed.wait(self._seconds(job)):
                return
            result = self._answer(job)
            if result is None:
                self._exit_code = KILLED
                return
            provenance = result.provenance.model_copy(update={"started_at": started,
                                                              "ended_at": datetime.now(timezone.utc)})
            _append(self._files.results, encode_line(result.model_copy(update={"provenance": provenance})))
        self._exit_code = 0

    def poll(self) -> Optional[int]:
        return KILLED if self._killed.is_set() else self._exit_code

    def kill(self) -> None:
        self._killed.set()
        self._thread.join()

    def log_tail(self, chars: int = LOG_TAIL_CHARS) -> str:
        return ""

    def oom_killed(self) -> bool:
        return False


class SimulatedRuntime(Runtime):
    def __init__(self, env: EnvSpec, seconds: Callable[[JobSpec], float], startup_s: float = 0.0,
                 isolate_groups: bool = False, poll_s: float = Runtime.poll_s, answer: Answer = answer_ok):
        """poll_s: scale it with the job times when they stand for longer real ones."""
        super().__init__(env)
        self.seconds, self.startup_s, self.isolate_groups, self.poll_s = seconds, startup_s, isolate_groups, poll_s
        self.answer = answer
        self.workers_started = 0

    def start_worker(self, files: WorkerFiles) -> SimulatedWorker:
        self.workers_started += 1
        return SimulatedWorker(files, self.seconds, self.startup_s, self.answer)


def _append(path: Path, line: str) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line)
