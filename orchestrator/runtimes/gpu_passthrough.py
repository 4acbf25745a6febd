"""How a worker container gets its GPU. Where the engine has NVIDIA's container toolkit, a DeviceRequest by UUID (the
toolkit mounts what is needed). Without it, the passthrough that the toolkit's CDI specs write, done by mlcbench: the
GPU's own device node (chosen by its UUID), the driver's control and unified-memory nodes, and the driver's user-space
libraries mounted read-only. The other GPUs' nodes are not given: the container can open only its own GPU. The
passthrough reads this host's /dev, /proc and loader cache, so it serves an engine on this host."""

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Union

from docker.types import DeviceRequest

from mlcbench.orchestrator.errors import EnvironmentFailure

# dockerd serves DeviceRequest(capabilities=[["gpu"]]) when this toolkit hook is on its PATH (moby's
# daemon/nvidia_linux.go); `nvidia-ctk runtime configure` also adds an "nvidia" runtime to the engine
TOOLKIT_HOOK = "nvidia-container-runtime-hook"
TOOLKIT_RUNTIME = "nvidia"

DEV = Path("/dev")
PROC_GPUS = Path("/proc/driver/nvidia/gpus")
# the driver's nodes every CUDA process opens besides its GPU's own; nvidia-uvm-tools (profilers) where it exists
CONTROL_NODES = ("nvidiactl", "nvidia-uvm")
OPTIONAL_NODES = ("nvidia-uvm-tools",)
# Where the driver's libraries go: CUDA images already have this folder on LD_LIBRARY_PATH and in ld.so.conf (it is
# where the toolkit's first version mounted them), so an image's loader finds them either way.
CONTAINER_DRIVER_LIBS = "/usr/local/nvidia/lib64"
# the driver libraries are found where the loader finds these two (`ldconfig -p`)
ANCHOR_LIBRARIES = ("libcuda.so.1", "libnvidia-ml.so.1")
# what CUDA, NVML and the driver's PTX JIT load (the toolkit's "compute" and "utility" sets), every name of each
# (libcuda.so too: Triton links its launchers against it); never the whole folder: on most hosts that is
# /usr/lib/x86_64-linux-gnu, whose glibc would then shadow the image's
DRIVER_LIBRARIES = ("libcuda.so", "libcudadebugger.so", "libnvidia-ml.so", "libnvidia-ptxjitcompiler.so",
                    "libnvidia-nvvm.so", "libnvidia-gpucomp.so")
LDCONFIG = "/sbin/ldconfig"


@dataclass(frozen=True)
class ToolkitGpu:
    """The GPU requested from NVIDIA's container toolkit by its UUID."""

    uuid: str

    def device_requests(self) -> list[DeviceRequest]:
        return [DeviceRequest(device_ids=[self.uuid], capabilities=[["gpu"]])]

    def devices(self) -> list[str]:
        return []

    def volumes(self) -> dict[str, dict[str, str]]:
        return {}

    def environment(self) -> dict[str, str]:
        return {}


@dataclass(frozen=True)
class Passthrough:
    """One GPU given to a container without the toolkit: host device nodes (each at /dev/<its name> inside) and the
    driver's library files (each read-only in CONTAINER_DRIVER_LIBS)."""

    uuid: str
    nodes: tuple[Path, ...]
    libraries: tuple[Path, ...]
    # the image's own LD_LIBRARY_PATH, kept after the driver's folder (a container's variable replaces the image's)
    image_library_path: str = ""

    def device_requests(self) -> list[DeviceRequest]:
        return []

    def devices(self) -> list[str]:
        return [f"{node}:/dev/{node.name}:rwm" for node in self.nodes]

    def volumes(self) -> dict[str, dict[str, str]]:
        return {str(library): {"bind": f"{CONTAINER_DRIVER_LIBS}/{library.name}", "mode": "ro"}
                for library in self.libraries}

    def environment(self) -> dict[str, str]:
        library_path = ":".join(filter(None, (CONTAINER_DRIVER_LIBS, self.image_library_path)))
        # CUDA then never probes the nodes it was not given; Triton finds libcuda without an ldconfig entry
        return {"LD_LIBRARY_PATH": library_path, "CUDA_VISIBLE_DEVICES": self.uuid,
                "TRITON_LIBCUDA_PATH": CONTAINER_DRIVER_LIBS}


GpuAccess = Union[ToolkitGpu, Passthrough]


def toolkit_serves_gpus(engine_info: Mapping[str, Any], hook_on_path: bool) -> bool:
    """Whether the engine (`client.info()`) has NVIDIA's container toolkit: an "nvidia" runtime, or the toolkit's hook
    on the PATH of the host (where engine and mlcbench share it)."""
    return hook_on_path or TOOLKIT_RUNTIME in (engine_info.get("Runtimes") or {})


def proc_minors(proc_gpus: Path = PROC_GPUS) -> dict[str, int]:
    """UUID -> device minor of each GPU whose driver entry names its UUID (the driver writes the UUID once it has
    read it: an idle GPU's entry may lack it)."""
    minors = {}
    for information in sorted(proc_gpus.glob("*/information")):
        fields = dict(_field(line) for line in information.read_text(errors="replace").splitlines() if ":" in line)
        if "GPU UUID" in fields and fields.get("Device Minor", "").isdigit():
            minors[fields["GPU UUID"]] = int(fields["Device Minor"])
    return minors


def _field(line: str) -> tuple[str, str]:
    key, _, value = line.partition(":")
    return key.strip(), value.strip()


def nvml_minor(uuid: str) -> Optional[int]:
    """The GPU's device minor from NVML; None where NVML is missing or does not know the UUID."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetMinorNumber(pynvml.nvmlDeviceGetHandleByUUID(uuid))
    except Exception:
        return None


def loader_cache() -> str:
    """`ldconfig -p`: every library the loader's cache knows, in the order the loader prefers them."""
    try:
        return subprocess.run([LDCONFIG, "-p"], capture_output=True, text=True, timeout=30, check=True).stdout
    except (subprocess.SubprocessError, OSError) as error:
        raise EnvironmentFailure(f"cannot read the loader cache ({LDCONFIG} -p: {error}) to find the NVIDIA driver's "
                                 f"libraries for GPU passthrough") from None


_CACHE_LINE = re.compile(r"^\s*(?P<name>\S+) \((?P<flags>[^)]*)\) => (?P<path>\S+)\s*$")


def library_locations(ldconfig_output: str) -> dict[str, Path]:
    """Library name -> its first 64-bit entry in `ldconfig -p`'s output (the one the loader takes)."""
    locations: dict[str, Path] = {}
    for line in ldconfig_output.splitlines():
        match = _CACHE_LINE.match(line)
        if match and "64" in match["flags"]:  # x86-64, AArch64: not a 32-bit compatibility copy
            locations.setdefault(match["name"], Path(match["path"]))
    return locations


def driver_libraries(ldconfig_output: str) -> tuple[Path, ...]:
    """The driver's library files (DRIVER_LIBRARIES, each of their names) in the folders where the loader finds
    ANCHOR_LIBRARIES; one file per name, the first folder's."""
    locations = library_locations(ldconfig_output)
    missing = [name for name in ANCHOR_LIBRARIES if name not in locations]
    if missing:
        raise EnvironmentFailure(f"GPU passthrough: the NVIDIA driver's {' and '.join(missing)} is not in the loader "
                                 f"cache (`ldconfig -p`); install the driver's user-space libraries, or the NVIDIA "
                                 f"container toolkit")
    folders = list(dict.fromkeys(locations[name].parent for name in ANCHOR_LIBRARIES))
    files: dict[str, Path] = {}
    for folder in folders:
        for library in DRIVER_LIBRARIES:
            for path in sorted(folder.glob(f"{library}*")):
                files.setdefault(path.name, path)
    return tuple(files.values())


def find_passthrough(uuid: str, *, dev: Path = DEV, proc_gpus: Path = PROC_GPUS,
                     minor_from_nvml: Callable[[str], Optional[int]] = nvml_minor,
                     ldconfig_output: Optional[str] = None, image_library_path: str = "") -> Passthrough:
    """The passthrough of the GPU with this UUID on this host (dev, proc_gpus, the loader cache: this host's unless
    given); an EnvironmentFailure names what is missing."""
    minor = proc_minors(proc_gpus).get(uuid)
    if minor is None:
        minor = minor_from_nvml(uuid)
    if minor is None:
        raise EnvironmentFailure(f"GPU passthrough: no GPU {uuid} on this host (neither {proc_gpus} nor NVML knows "
                                 f"its device minor)")
    own = dev / f"nvidia{minor}"
    required = [own, *(dev / name for name in CONTROL_NODES)]
    missing = [str(node) for node in required if not node.exists()]
    if missing:
        raise EnvironmentFailure(f"GPU passthrough for {uuid} (device minor {minor}): no {', '.join(missing)}; the "
                                 f"driver creates the nodes when a CUDA program first runs on the host "
                                 f"(or `nvidia-modprobe -u -c={minor}`)")
    optional = [node for node in (dev / name for name in OPTIONAL_NODES) if node.exists()]
    return Passthrough(uuid=uuid, nodes=(*required, *optional),
                       libraries=driver_libraries(loader_cache() if ldconfig_output is None else ldconfig_output),
                       image_library_path=image_library_path)
