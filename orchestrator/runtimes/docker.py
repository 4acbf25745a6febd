"""Docker envs: each worker is a container of the env's image, with the repository's schema/ and workers/ mounted
read-only (worker changes need no rebuild), the exchange folder read-write, and the GPU pinned by UUID (through NVIDIA's
container toolkit, or without it by passing the GPU's device nodes and driver libraries: gpu_passthrough.py). Workers are
locked down: not root, no network, no capabilities, no privilege gain, a read-only root filesystem, process and
memory limits from env.toml."""

import os
import shutil
import socket
from pathlib import Path
from typing import Any, Iterable, Optional

import docker
import docker.errors
from docker.types import Ulimit
from rich.console import Console

from mlcbench.orchestrator.errors import UsageError
from mlcbench.orchestrator.envs.images import BuildOptions, EnvImage, connect, ensure_image
from mlcbench.orchestrator.runtimes.base import LOG_TAIL_CHARS, Lane, Runtime, WorkerFiles
from mlcbench.orchestrator.runtimes.gpu_passthrough import (TOOLKIT_HOOK, GpuAccess, ToolkitGpu, find_passthrough,
                                                            toolkit_serves_gpus)
from mlcbench.orchestrator.store.redaction import SECRETS
from mlcbench.schema import EnvSpec, JobSpec
from mlcbench.schema.protocol import IMAGE_DIGEST_ENV, read_lines, worker_command

CODE_ROOT = Path(__file__).resolve().parents[2]
CODE_PACKAGES = ("workers", "schema")
CONTAINER_ROOT = "/mlcbench"
# the packages are mounted as mlcbench/<package> under this folder, the worker's PYTHONPATH
CONTAINER_CODE = f"{CONTAINER_ROOT}/code"
CONTAINER_WORK = f"{CONTAINER_ROOT}/work"
CONTAINER_CACHE = f"{CONTAINER_ROOT}/cache"
LABEL = "mlcbench"
# nobody:nogroup in Debian and Ubuntu images: where the host user is root, workers run as this instead
UNPRIVILEGED_UID = UNPRIVILEGED_GID = 65534
STOP_WAIT_S = 30


def container_options(env: EnvSpec, image: str, files: WorkerFiles, cache_dir: Path, gpu: Optional[GpuAccess] = None,
                      *, extra_env: Optional[dict[str, str]] = None, labels: Optional[dict[str, str]] = None,
                      network: bool = False, code_root: Path = CODE_ROOT, user: Optional[str] = None,
                      checkpoints: Iterable[str] = (), cpus: Optional[frozenset[int]] = None) -> dict[str, Any]:
    """Keyword arguments of `client.containers.run` for one worker (pure: no engine needed). gpu: how the container
    gets its GPU, for an env that targets GPUs."""
    gpu = gpu if env.gpu_archs else None
    work = files.folder.resolve()
    volumes = {str(code_root / package): {"bind": f"{CONTAINER_CODE}/mlcbench/{package}", "mode": "ro"}
               for package in CODE_PACKAGES}
    # checkpoint folders at the same path inside, so the jobs' model_path (part of their identity) needs no rewrite
    volumes.update({folder: {"bind": folder, "mode": "ro"} for folder in checkpoints})
    volumes[str(work)] = {"bind": CONTAINER_WORK, "mode": "rw"}
    volumes[str(cache_dir.resolve())] = {"bind": CONTAINER_CACHE, "mode": "rw"}
    if gpu:
        volumes.update(gpu.volumes())
    environment = {
        **env.run.env,
        "PYTHONPATH": CONTAINER_CODE,
        "PYTHONUNBUFFERED": "1",
        # the host uid may have no passwd entry in the image: give getpass a name (the worker makes its home, and
        # every folder its libraries write, in the cache folder: workers/cache_environment.py)
        "USER": "mlcbench",
        **{name: os.environ[name] for name in SECRETS if os.environ.get(name)},
        **(extra_env or {}),
        **(gpu.environment() if gpu else {}),
    }
    options: dict[str, Any] = {
        "image": image,
        "command": worker_command("python", CONTAINER_WORK, CONTAINER_CACHE, files.calibrate),
        "detach": True,
        # a small init as PID 1: the worker may then kill itself or crash like any process, and compilers' children
        # are reaped (the kernel ignores signals that a namespace's PID 1 sends itself without a handler)
        "init": True,
        "labels": {LABEL: "1", f"{LABEL}.env": env.name, **(labels or {})},
        "volumes": volumes,
        "working_dir": CONTAINER_WORK,
        # the host's name, not the container's id: the processes of one cell must be seen to share a host
        "hostname": socket.gethostname(),
        "environment": environment,
        "user": user or "{}:{}".format(*worker_ids()),
        "network_mode": "bridge" if network else "none",
        "privileged": False,
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        # only the exchange and cache folders (mounted above) can be written
        "read_only": True,
        "pids_limit": env.run.pids_limit,
        "ulimits": [Ulimit(name=name, soft=value, hard=value) for name, value in env.run.ulimits.items()],
    }
    if env.run.memory:
        options["mem_limit"] = env.run.memory
    if cpus:
        options["cpuset_cpus"] = ",".join(map(str, sorted(cpus)))
    if env.run.ipc_host:
        options["ipc_mode"] = "host"  # /dev/shm is the host's then: a shm size would not apply
    elif env.run.shm_size:
        options["shm_size"] = env.run.shm_size
    if gpu and gpu.device_requests():
        options["device_requests"] = gpu.device_requests()
    if gpu and gpu.devices():
        options["devices"] = gpu.devices()
    return options


def gpu_access(client: docker.DockerClient, image: EnvImage, gpu_uuid: str) -> GpuAccess:
    """The toolkit's DeviceRequest where the engine has the toolkit, else the passthrough of this host's GPU."""
    if toolkit_serves_gpus(client.info(), shutil.which(TOOLKIT_HOOK) is not None):
        return ToolkitGpu(gpu_uuid)
    image_env = dict(item.split("=", 1) for item in client.images.get(image.tag).attrs["Config"].get("Env") or [])
    return find_passthrough(gpu_uuid, image_library_path=image_env.get("LD_LIBRARY_PATH", ""))


def checkpoint_folders(files: WorkerFiles) -> set[str]:
    """The model_path folders the worker's jobs load."""
    jobs = [JobSpec.model_validate_json(line) for line in read_lines(files.jobs)]
    return {job.model_path for job in jobs if job.model_path}


class ContainerWorker:
    def __init__(self, container, files: WorkerFiles):
        self.container = container
        self._files = files
        self._removed = False
        self._saved_exit_code: Optional[int] = None

    def _state(self) -> dict[str, Any]:
        self.container.reload()
        return self.container.attrs["State"]

    def poll(self) -> Optional[int]:
        if self._removed:
            return self._saved_exit_code
        state = self._state()
        return state["ExitCode"] if state["Status"] in ("exited", "dead") else None

    def kill(self) -> None:
        try:
            self.container.kill()
        except docker.errors.APIError:  # it ended on its own meanwhile
            pass
        self.container.wait(timeout=STOP_WAIT_S)

    def log_tail(self, chars: int = LOG_TAIL_CHARS) -> str:
        if self._removed:
            return self._files.log.read_text(encoding="utf-8", errors="replace")[-chars:]
        return self.container.logs(tail=500).decode("utf-8", "replace")[-chars:]

    def oom_killed(self) -> bool:
        return bool(self._state().get("OOMKilled"))

    def remove(self) -> None:
        """Keep the whole log in the exchange folder (worker.log, as the local runtime does), then remove."""
        if self._removed:
            return
        try:
            self._saved_exit_code = self.poll()
            self._files.log.write_bytes(self.container.logs())
            self.container.remove(force=True)
        except docker.errors.NotFound:
            pass
        self._removed = True


def inherited_cpus() -> Optional[frozenset[int]]:
    """The cores this process may run on, where they are fewer than the host's (taskset, a cpuset): a local worker
    inherits them, a container would not (two sweeps side by side, one GPU and half the cores each)."""
    own = frozenset(os.sched_getaffinity(0))
    return own if len(own) < (os.cpu_count() or 0) else None


def worker_ids() -> tuple[int, int]:
    """The uid:gid a worker runs as: the host user's, so that what it writes is theirs; never root."""
    if os.getuid() == 0:
        return UNPRIVILEGED_UID, UNPRIVILEGED_GID
    return os.getuid(), os.getgid()


def hand_to_worker(folder: Path) -> None:
    """Make a folder the worker writes in (and all in it) the worker's, where the host user differs (root)."""
    uid, gid = worker_ids()
    if (uid, gid) == (os.getuid(), os.getgid()):
        return
    for root, _, names in os.walk(folder):
        for path in (root, *(os.path.join(root, name) for name in names)):
            os.chown(path, uid, gid, follow_symlinks=False)


class DockerRuntime(Runtime):
    isolate_groups = True

    def __init__(self, env: EnvSpec, cache_dir: Path, sweep_id: str, gpu_uuid: Optional[str] = None,
                 build: Optional[BuildOptions] = None, extra_env: Optional[dict[str, str]] = None,
                 network: bool = False, client: Optional[docker.DockerClient] = None,
                 console: Optional[Console] = None, cpus: Optional[frozenset[int]] = None):
        """Connects, removes containers left by an interrupted earlier run, and builds the env's image if needed
        (build None: reuse any image of the env's current files, else build with the default settings)."""
        super().__init__(env)
        self.client = client or connect()
        self.cache_dir = cache_dir
        self.extra_env = extra_env or {}
        self.network = network
        self.cpus = cpus
        self.labels = {f"{LABEL}.sweep": sweep_id,
                       f"{LABEL}.pid": str(os.getpid())}
        remove_leftovers(self.client)
        self.image: EnvImage = ensure_image(self.client, env, build, console)
        self.gpu = gpu_access(self.client, self.image, gpu_uuid) if gpu_uuid and env.gpu_archs else None
        self._workers: list[ContainerWorker] = []
        self.cache_dir.mkdir(parents=True, exist_ok=True)  # created by the engine it would belong to root
        hand_to_worker(self.cache_dir)

    @classmethod
    def for_sweep(cls, env: EnvSpec, cache_dir: Path, sweep_id: str, lane: Lane) -> "DockerRuntime":
        return cls(env, cache_dir=cache_dir, sweep_id=sweep_id, gpu_uuid=lane.gpu_uuid, extra_env=lane.environment(),
                   cpus=lane.cpus or inherited_cpus())

    def start_worker(self, files: WorkerFiles) -> ContainerWorker:
        self._remove_finished()
        hand_to_worker(files.folder)
        options = container_options(self.env, self.image.tag, files, self.cache_dir, self.gpu,
                                    extra_env={IMAGE_DIGEST_ENV: self.image.digest, **self.extra_env},
                                    labels=self.labels, network=self.network, checkpoints=checkpoint_folders(files),
                                    cpus=self.cpus)
        try:
            container = self.client.containers.run(**options)
        except docker.errors.APIError as error:
            raise UsageError(f"env {self.env.name!r}: cannot start a worker container of {self.image.tag}: "
                             f"{error.explanation or error}") from None
        worker = ContainerWorker(container, files)
        self._workers.append(worker)
        return worker

    def image_digest(self) -> Optional[str]:
        return self.image.digest

    def close(self) -> None:
        for worker in self._workers:
            if worker.poll() is None:
                worker.kill()
            worker.remove()
        self._workers.clear()

    def _remove_finished(self) -> None:
        for worker in [w for w in self._workers if w.poll() is not None]:
            worker.remove()
            self._workers.remove(worker)


def remove_leftovers(client: docker.DockerClient) -> list[str]:
    """Remove mlcbench containers whose mlcbench process is gone (an interrupted sweep); returns their names.
    Containers of a sweep still running on this host (another GPU's) are left alone."""
    removed = []
    for container in client.containers.list(all=True, filters={"label": f"{LABEL}=1"}):
        pid = container.labels.get(f"{LABEL}.pid", "")
        if pid.isdigit() and _alive(int(pid)):
            continue
        try:
            container.remove(force=True)
            removed.append(container.name)
        except docker.errors.NotFound:
            pass
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
