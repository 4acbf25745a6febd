"""What every runtime provides: a way to start a worker on an exchange folder, and a handle to watch and kill it."""

import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Protocol

from mlcbench.schema import EnvSpec, GpuInfo, protocol
from mlcbench.schema.protocol import Startup

LOG_TAIL_CHARS = 4000


def file_tail(path: Path, chars: int = LOG_TAIL_CHARS) -> str:
    """The last `chars` bytes of a worker's log, as text ("" before it has one)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, path.stat().st_size - chars))
            return handle.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""


class WorkerHandle(Protocol):
    def poll(self) -> Optional[int]:
        """The exit code once the worker has ended, else None."""

    def kill(self) -> None: ...

    def log_tail(self, chars: int = LOG_TAIL_CHARS) -> str: ...

    def oom_killed(self) -> bool:
        """True when the runtime knows the worker was killed for memory (e.g. Docker's OOMKilled)."""


@dataclass(frozen=True)
class WorkerFiles:
    """A worker's exchange folder, as the host sees it."""

    folder: Path
    # measure the device's ceilings before the first job (protocol.CALIBRATION_FILE)
    calibrate: bool = False

    @property
    def calibration(self) -> Path:
        return self.folder / protocol.CALIBRATION_FILE

    @property
    def jobs(self) -> Path:
        return self.folder / protocol.JOBS_FILE

    @property
    def results(self) -> Path:
        return self.folder / protocol.RESULTS_FILE

    @property
    def progress(self) -> Path:
        return self.folder / protocol.PROGRESS_FILE

    @property
    def log(self) -> Path:
        return self.folder / protocol.LOG_FILE


@dataclass(frozen=True)
class Lane:
    """One GPU's share of a sweep: the GPU (None: the CPU), the host's cores its workers run on (None: wherever the
    host runs them) and how its workers' interpreters start (protocol.Startup)."""

    gpu: Optional[GpuInfo] = None
    cpus: Optional[frozenset[int]] = None
    startup: Startup = "exec"
    # where lanes share the GPU (--overlap): the folder their workers time through one at a time
    gate: Optional[Path] = None

    @property
    def gpu_uuid(self) -> Optional[str]:
        return self.gpu.uuid if self.gpu is not None else None

    def environment(self) -> dict[str, str]:
        """What a worker's environment adds: Inductor's compile workers held to the lane's cores, so that a compile
        does not take the cores of a neighbour's timed calls."""
        threads = {"TORCHINDUCTOR_COMPILE_THREADS": str(len(self.cpus))} if self.cpus else {}
        return {**threads, protocol.TIMING_GATE_ENV: str(self.gate.resolve())} if self.gate is not None else threads


class Runtime(ABC):
    """Starts workers for one environment."""

    # one worker per (model, workflow), so a crash or leaked state stays within its group
    isolate_groups: bool = False
    # how often a worker's result stream and state are checked (a container's state is an engine API call)
    poll_s: float = 0.05

    def __init__(self, env: EnvSpec):
        self.env = env

    @classmethod
    def for_sweep(cls, env: EnvSpec, cache_dir: Path, sweep_id: str, lane: Lane) -> "Runtime":
        """The runtime a sweep starts for one lane (GPU) of an env of this kind; a runtime that no env.toml kind
        names (registry.runtime_class), such as a test's simulation, has none."""
        raise NotImplementedError(f"{cls.__name__} is not an env's runtime")

    @abstractmethod
    def start_worker(self, files: WorkerFiles) -> WorkerHandle: ...

    def begin_round(self) -> None:
        """A new round of the lane's cells starts: what its workers share across a round (a zygote) is renewed, so
        that no two processes of one cell share it."""

    def image_digest(self) -> Optional[str]:
        return None

    def close(self) -> None:
        """Release whatever the runtime holds (containers); called even when the sweep is interrupted."""


class StopRequest:
    """How a sweep is asked to stop (Ctrl-C): `after_job` lets each job in flight finish and be stored first,
    `now` drops the jobs in flight. Shared by every worker thread of a sweep."""

    def __init__(self) -> None:
        self.after_job = threading.Event()
        self.now = threading.Event()

    @property
    def requested(self) -> bool:
        return self.after_job.is_set() or self.now.is_set()


