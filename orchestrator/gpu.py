"""GPU detection (NVML, falling back to nvidia-smi) and the --gpu tag check."""

import re
import shutil
import subprocess
from dataclasses import dataclass
from typing import Optional

from mlcbench.orchestrator.errors import UsageError
from mlcbench.schema import GPUS, GpuInfo, gpu_tag_for_name

CPU_TAG = "cpu"


def detect() -> list[GpuInfo]:
    """The GPUs of this host, in NVML index order; empty when there are none (or no driver)."""
    return _detect_nvml() or _detect_nvidia_smi()


def _detect_nvml() -> list[GpuInfo]:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return []
    gpus = []
    driver = _text(pynvml.nvmlSystemGetDriverVersion())
    for index in range(pynvml.nvmlDeviceGetCount()):
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
        gpus.append(GpuInfo(
            name=_text(pynvml.nvmlDeviceGetName(handle)), uuid=_text(pynvml.nvmlDeviceGetUUID(handle)), index=index,
            driver=driver, compute_capability=f"{major}.{minor}",
            memory_total_bytes=pynvml.nvmlDeviceGetMemoryInfo(handle).total,
            sm_clock_mhz=pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM),
            mem_clock_mhz=pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_MEM),
        ))
    return gpus


def _detect_nvidia_smi() -> list[GpuInfo]:
    if shutil.which("nvidia-smi") is None:
        return []
    query = "index,name,uuid,driver_version,compute_cap,memory.total"
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
    except (subprocess.SubprocessError, OSError):
        return []
    gpus = []
    for line in out.strip().splitlines():
        index, name, uuid, driver, cc, memory_mib = [part.strip() for part in line.split(",")]
        gpus.append(GpuInfo(name=name, uuid=uuid, index=int(index), driver=driver, compute_capability=cc,
                            memory_total_bytes=int(float(memory_mib)) * 1024 * 1024))
    return gpus


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass(frozen=True)
class Target:
    """What a sweep runs on: the tag its rows carry, the device jobs use, and the GPUs it runs workers on, one each
    (empty on CPU)."""

    tag: str
    device: str
    gpus: tuple[GpuInfo, ...]


def tag_for(gpu: GpuInfo) -> str:
    """Catalog key, or a slug of the name for a GPU the catalog does not know."""
    return gpu_tag_for_name(gpu.name) or re.sub(r"[^a-z0-9]+", "-", gpu.name.lower()).strip("-")


def select_gpus(selection: Optional[str], detected: list[GpuInfo]) -> list[GpuInfo]:
    """--gpus: 'all', or NVML indices '0,2'; None: the first GPU only."""
    if selection is None or not detected:
        if selection not in (None, "all"):
            raise UsageError(f"--gpus {selection}: this host has no GPU")
        return detected[:1]
    chosen = list(detected) if selection.strip() == "all" else _by_indices(selection, detected)
    tags = {tag_for(gpu) for gpu in chosen}
    if len(tags) > 1:
        raise UsageError(f"--gpus {selection} mixes GPU models ({', '.join(sorted(tags))}): results carry one GPU tag "
                         f"per sweep; run one sweep per model")
    return chosen


def _by_indices(selection: str, detected: list[GpuInfo]) -> list[GpuInfo]:
    by_index = {gpu.index if gpu.index is not None else position: gpu for position, gpu in enumerate(detected)}
    chosen: list[GpuInfo] = []
    for part in (part.strip() for part in selection.split(",")):
        if not part.isdigit() or int(part) not in by_index:
            raise UsageError(f"--gpus {selection}: {part!r} is not a GPU index of this host "
                             f"(known: all, {', '.join(map(str, by_index))})")
        if by_index[int(part)] not in chosen:
            chosen.append(by_index[int(part)])
    return chosen


def resolve_target(requested: Optional[str], detected: list[GpuInfo], force: bool = False,
                   gpus: Optional[str] = None) -> Target:
    """requested: the --gpu tag (None: the detected one); gpus: the --gpus selection."""
    detected = select_gpus(gpus, detected)
    detected_tag = tag_for(detected[0]) if detected else CPU_TAG
    if requested is not None and requested != CPU_TAG and requested not in GPUS:
        raise UsageError(f"unknown GPU tag {requested!r}; known: {', '.join([CPU_TAG, *GPUS])}")
    tag = requested or detected_tag
    if tag != detected_tag and not force:
        found = f"{detected[0].name} ({detected_tag})" if detected else "no GPU"
        raise UsageError(f"--gpu {tag} contradicts this host, which has {found}; "
                         f"pass --force-gpu-tag to tag results {tag!r} anyway")
    if tag == CPU_TAG or not detected:
        return Target(tag=tag, device="cpu", gpus=())
    return Target(tag=tag, device="cuda", gpus=tuple(detected))
