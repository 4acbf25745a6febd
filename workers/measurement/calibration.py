"""The device's real ceilings, timed the way every job is (timing.time_calls): a device-to-device copy for the memory
bandwidth (bytes read + bytes written), and an n x n x n matmul per precision for the compute rate."""

import traceback
from datetime import datetime, timezone
from pathlib import Path

from mlcbench.schema import Calibration
from mlcbench.workers.measurement.clocks import read_clocks
from mlcbench.workers.measurement.energy import measure_update_period, remember_update_period
from mlcbench.workers.measurement.probes import gpu_info
from mlcbench.workers.measurement.timing import time_calls

# (copy buffer bytes, matmul n): on a GPU large enough to leave the caches and fill the SMs (a 1 GiB copy, 8192^3:
# ~1.1 TFLOP a call); on a CPU small enough to take a second or two
SIZES = {"cuda": (1 << 30, 8192), "cpu": (1 << 26, 1024)}
PRECISIONS = {"cuda": ("bf16", "fp16", "fp32"), "cpu": ("fp32",)}
WARMUP, REPEATS = 3, 10


def calibrate(device: str, cache_dir: Path) -> Calibration:
    """`cache_dir`: the worker's cache folder, where the energy counter's update period is kept for the processes
    after this one (measurement/energy.py)."""
    import torch

    cuda = device == "cuda"
    copy_bytes, n = SIZES[device]
    gpu = gpu_info() if cuda else None
    clocks = [read_clocks(gpu.uuid, "start")] if gpu and gpu.uuid else []
    calibration = Calibration(device=device, gpu=gpu, copy_bytes=copy_bytes, gemm_n=n,
                              measured_at=datetime.now(timezone.utc))
    if gpu and gpu.uuid:  # measured on the idle GPU, before the copies and matmuls heat it
        intervals, no_counter = measure_update_period(gpu.uuid)
        if intervals:
            remember_update_period(cache_dir, gpu.uuid, max(intervals))
        calibration = calibration.model_copy(update={
            "energy_update_period_s": max(intervals) if intervals else None,
            "energy_update_intervals_s": intervals, "energy_counter": no_counter})
    try:
        copy = _copy_timing(copy_bytes, device)
        tflops = {}
        dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
        for precision in PRECISIONS[device]:
            gemm = _matmul_timing(n, dtypes[precision], device)
            tflops[precision] = 2 * n ** 3 / (gemm.median_ms * 1e-3) / 1e12
        calibration = calibration.model_copy(update={
            "copy_gbs": 2 * copy_bytes / (copy.median_ms * 1e-3) / 1e9, "gemm_tflops": tflops})
    except Exception:  # a partial calibration is still worth keeping; the reason goes with it
        calibration = calibration.model_copy(update={"error": traceback.format_exc()[-2000:]})
    finally:
        if cuda:
            torch.cuda.empty_cache()
    if gpu and gpu.uuid:
        clocks.append(read_clocks(gpu.uuid, "end"))
    return calibration.model_copy(update={"clocks": [reading for reading in clocks if reading is not None]})


# each in a function of its own, so that its buffers are freed when it returns


def _copy_timing(copy_bytes: int, device: str):
    import torch

    source = torch.empty(copy_bytes, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    return time_calls(lambda: target.copy_(source), WARMUP, REPEATS, device == "cuda")


def _matmul_timing(n: int, dtype, device: str):
    import torch

    a = torch.randn(n, n, dtype=dtype, device=device)
    b = torch.randn(n, n, dtype=dtype, device=device)
    return time_calls(lambda: a @ b, WARMUP, REPEATS, device == "cuda")
