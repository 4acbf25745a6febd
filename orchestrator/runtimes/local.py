"""The `local` env: the worker is a subprocess of this interpreter (no container), a new interpreter each
(startup "exec") or forked from a pre-imported one (startup "fork", orchestrator/runtimes/forking.py)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional, Union

from mlcbench.orchestrator.runtimes.base import LOG_TAIL_CHARS, Lane, Runtime, WorkerFiles, file_tail
from mlcbench.orchestrator.runtimes.forking import ForkedWorker, Zygote, ZygoteUnavailable
from mlcbench.schema.protocol import (LAUNCHED_AT_ENV, ORCHESTRATOR_PID_ENV, STARTUP_ENV, ForkRequest, Startup,
                                      worker_command, zygote_command)

class LocalWorker:
    def __init__(self, process: subprocess.Popen, log: Path):
        self._process = process
        self._log = log

    def poll(self) -> Optional[int]:
        return self._process.poll()

    def kill(self) -> None:
        if self._process.poll() is None:
            os.killpg(self._process.pid, signal.SIGKILL)  # the worker's own children (compilers) go with it
            self._process.wait()

    def log_tail(self, chars: int = LOG_TAIL_CHARS) -> str:
        return file_tail(self._log, chars)

    def oom_killed(self) -> bool:
        return False


class LocalRuntime(Runtime):
    def __init__(self, env, cache_dir: Path, extra_env: Optional[dict[str, str]] = None,
                 cpus: Optional[frozenset[int]] = None, startup: Startup = "exec"):
        super().__init__(env)
        self.cache_dir = cache_dir
        self.extra_env = extra_env or {}
        self.cpus = cpus
        self.startup: Startup = startup
        self._zygote: Optional[Zygote] = None
        # why this runtime's workers start as new interpreters although forking was asked for
        self.fork_refused: Optional[str] = None

    @classmethod
    def for_sweep(cls, env, cache_dir: Path, sweep_id: str, lane: Lane) -> "LocalRuntime":
        visible = {"CUDA_VISIBLE_DEVICES": lane.gpu_uuid} if lane.gpu_uuid else {}
        return cls(env, cache_dir=cache_dir, extra_env={**visible, **lane.environment()}, cpus=lane.cpus,
                   startup=lane.startup)

    def start_worker(self, files: WorkerFiles) -> Union[LocalWorker, ForkedWorker]:
        command = worker_command(sys.executable, str(files.folder), str(self.cache_dir.resolve()), files.calibrate)
        launched = {LAUNCHED_AT_ENV: repr(time.time())}
        if self.startup == "fork" and self.fork_refused is None:
            try:
                return self._forking(files.folder).fork(ForkRequest(argv=command[3:], cwd=files.folder,
                                                                    log=files.log, env=launched))
            except ZygoteUnavailable as refused:
                self.fork_refused = str(refused)
                self.begin_round()
        with open(files.log, "ab") as log:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                       env={**self._environment(), **launched, STARTUP_ENV: "exec"},
                                       cwd=files.folder, start_new_session=True)
        if self.cpus:
            os.sched_setaffinity(process.pid, self.cpus)
        return LocalWorker(process, files.log)

    def begin_round(self) -> None:
        if self._zygote is not None:
            self._zygote.close()
            self._zygote = None

    def close(self) -> None:
        if self._zygote is not None:
            self._zygote.kill()
            self._zygote = None

    def _environment(self) -> dict[str, str]:
        return {**os.environ, **self.env.run.env, **self.extra_env, "PYTHONUNBUFFERED": "1",
                ORCHESTRATOR_PID_ENV: str(os.getpid())}

    def _forking(self, folder: Path) -> Zygote:
        """This round's zygote, started at its first worker (its log beside that worker's)."""
        if self._zygote is None:
            self._zygote = Zygote(zygote_command(sys.executable, str(self.cache_dir.resolve())), self._environment(),
                                  folder.parent / "zygote.log", folder.parent, self.cpus)
        return self._zygote
