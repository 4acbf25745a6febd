"""The GPU's clocks, power limit, temperature and throttle reasons from NVML, read at the start and end of each job
and while its timed calls run (nvidia-ml-py, imported here only: absent or unusable NVML gives no reading)."""

import functools
from typing import Callable, Literal, Optional

from mlcbench.schema import Clocks

# schema name -> pynvml constant (the ClocksThrottleReason names exist in old and new nvidia-ml-py alike)
_REASONS = {
    "gpu_idle": "nvmlClocksThrottleReasonGpuIdle",
    "applications_clocks": "nvmlClocksThrottleReasonApplicationsClocksSetting",
    "sw_power_cap": "nvmlClocksThrottleReasonSwPowerCap",
    "hw_slowdown": "nvmlClocksThrottleReasonHwSlowdown",
    "sync_boost": "nvmlClocksThrottleReasonSyncBoost",
    "sw_thermal": "nvmlClocksThrottleReasonSwThermalSlowdown",
    "hw_thermal": "nvmlClocksThrottleReasonHwThermalSlowdown",
    "hw_power_brake": "nvmlClocksThrottleReasonHwPowerBrakeSlowdown",
    "display_clocks": "nvmlClocksThrottleReasonDisplayClockSetting",
}


@functools.cache  # NVML is initialised once per process; a failure raises and is not cached
def nvml_handle(device_uuid: str):
    import pynvml

    pynvml.nvmlInit()
    return pynvml.nvmlDeviceGetHandleByUUID(device_uuid)


def read_clocks(device_uuid: str, at: Literal["start", "end", "during"]) -> Optional[Clocks]:
    try:
        import pynvml

        handle = nvml_handle(device_uuid)
        mask = pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle)
        return Clocks(
            at=at,
            sm_mhz=pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
            mem_mhz=pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM),
            power_limit_w=pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000,
            temperature_c=pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU),
            reasons=[name for name, constant in _REASONS.items() if mask & getattr(pynvml, constant, 0)],
        )
    except Exception:  # no NVML (CPU, a container without the driver's library): no reading
        return None


def clocks_during_calls(cuda: bool) -> Optional[Callable[[], Optional[Clocks]]]:
    """A reader for the current CUDA device's clocks while timed calls run (None on a CPU)."""
    if not cuda:
        return None
    uuid = current_gpu_uuid()
    return lambda: read_clocks(uuid, "during")


def current_gpu_uuid() -> str:
    """The current CUDA device's UUID as NVML names it."""
    import torch

    return f"GPU-{torch.cuda.get_device_properties(torch.cuda.current_device()).uuid}"
