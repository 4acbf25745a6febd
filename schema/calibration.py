"""What a GPU actually reaches, measured by the worker once per GPU per sweep: the ceilings its figures are read
against, besides the catalog's spec."""

from datetime import datetime
from typing import Literal, Optional

from pydantic import Field

from mlcbench.schema.base import SCHEMA_VERSION, StrictModel
from mlcbench.schema.results import Clocks, GpuInfo


class Calibration(StrictModel):
    """A device-to-device copy and an n x n x n matmul per precision, timed on the device of a sweep."""

    schema_version: Literal[1] = SCHEMA_VERSION
    device: Literal["cuda", "cpu"]
    gpu: Optional[GpuInfo] = None
    copy_bytes: int = Field(description="size of the buffer copied device to device")
    copy_gbs: Optional[float] = Field(None, description="(bytes read + bytes written) / median copy time, GB/s")
    gemm_n: int = Field(description="n of the n x n x n matmuls")
    gemm_tflops: dict[str, float] = Field(default={}, description="precision -> 2 n^3 / median matmul time")
    clocks: list[Clocks] = []
    energy_update_period_s: Optional[float] = Field(
        None, description="the longest of the intervals between changes of NVML's energy counter (polled until it "
                          "changed a few times): a process's energy figure needs a window 20 times as long")
    energy_update_intervals_s: list[float] = []
    energy_counter: Optional[str] = Field(None, description="why the period was not measured (no counter)")
    measured_at: Optional[datetime] = None
    error: Optional[str] = Field(None, description="why a figure is missing")
    # stamped by the host when it stores the calibration
    gpu_tag: Optional[str] = None
    env: Optional[str] = None
    sweep_id: Optional[str] = None
