"""The `local` env: the worker is a subprocess of this interpreter (no container)."""

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Optional

from mlcbench.orchestrator.runtimes.base import LOG_TAIL_CHARS, Runtime, WorkerFiles
from mlcbench.schema.protocol import ORCHESTRATOR_PID_ENV, worker_command

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
        try:
            with open(self._log, "rb") as handle:
                handle.seek(max(0, self._log.stat().st_size - chars))
                return handle.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def oom_killed(self) -> bool:
        return False


class LocalRuntime(Runtime):
    def __init__(self, env, cache_dir: Path, extra_env: Optional[dict[str, str]] = None):
        super().__init__(env)
        self.cache_dir = cache_dir
        self.extra_env = extra_env or {}

    @classmethod
    def for_sweep(cls, env, cache_dir: Path, sweep_id: str, gpu_uuid: Optional[str]) -> "LocalRuntime":
        return cls(env, cache_dir=cache_dir, extra_env={"CUDA_VISIBLE_DEVICES": gpu_uuid} if gpu_uuid else {})

    def start_worker(self, files: WorkerFiles) -> LocalWorker:
        environment = {**os.environ, **self.env.run.env, **self.extra_env, "PYTHONUNBUFFERED": "1",
                       ORCHESTRATOR_PID_ENV: str(os.getpid())}
        command = worker_command(sys.executable, str(files.folder), str(self.cache_dir.resolve()), files.calibrate)
        with open(files.log, "ab") as log:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=environment,
                                       cwd=files.folder, start_new_session=True)
        return LocalWorker(process, files.log)
