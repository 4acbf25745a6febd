"""What a result's provenance says about where it ran: the GPU, the host's CPU, the installed packages."""

import functools
import os
import platform
from importlib import metadata
from typing import Optional

from mlcbench.schema import GpuInfo
from mlcbench.workers.measurement.clocks import current_gpu_uuid

TRACKED_PACKAGES = ("torch", "transformers", "onnxruntime", "onnxruntime-gpu", "onnx", "tensorrt", "torch_tensorrt",
                    "tensorrt_llm", "torch_xla", "jax", "jaxlib", "torchax", "triton", "numpy")


@functools.cache  # the worker sees one GPU, whose identity does not change while it runs
def gpu_info() -> Optional[GpuInfo]:
    try:
        import torch

        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        uuid = current_gpu_uuid()
    except Exception:
        return None
    info = dict(name=props.name, uuid=uuid, compute_capability=f"{props.major}.{props.minor}",
                memory_total_bytes=props.total_memory)
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByUUID(uuid)
        info.update(
            index=pynvml.nvmlDeviceGetIndex(handle),
            driver=pynvml.nvmlSystemGetDriverVersion(),
            sm_clock_mhz=pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM),
            mem_clock_mhz=pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_MEM),
        )
    except Exception:
        pass
    return GpuInfo(**info)


@functools.cache  # the CPU does not change while a worker runs
def host_cpu() -> Optional[str]:
    """The CPU's model name: /proc/cpuinfo's on Linux (a container's is the host's), else what platform knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or None


def host_cpus() -> Optional[int]:
    """The logical CPUs this process may run on: its affinity (a container's cpuset, a Slurm task's CPUs)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count()


def host_load() -> Optional[float]:
    """The machine's 1-minute load average per logical CPU (a container sees the machine's): over 1.0, more threads
    were runnable than it has CPUs. None where the system keeps none."""
    try:
        return round(os.getloadavg()[0] / (os.cpu_count() or 1), 3)
    except (AttributeError, OSError):
        return None


@functools.cache  # installed versions do not change while a worker runs; reading them costs ~15 ms
def package_versions() -> dict[str, str]:
    versions = {}
    for name in TRACKED_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions
