"""Pydantic models shared by the host orchestrator and the in-container worker.

Pure data and validation: this package imports pydantic and the standard library only, so that it loads in
every environment image (Python 3.10-3.12).
"""

from mlcbench.schema.base import SCHEMA_VERSION, StrictModel
from mlcbench.schema.calibration import Calibration
from mlcbench.schema.catalog import (
    FAULT_WORKFLOWS,
    GPUS,
    MODELS,
    OWN_WORKER_WORKFLOWS,
    REFERENCE,
    WORKFLOWS,
    GpuPeaks,
    ModelInfo,
    ModelKind,
    WorkflowInfo,
    gpu_tag_for_name,
    why_not_run,
    workflows_for,
)
from mlcbench.schema.envs import EnvSpec, RunOptions
from mlcbench.schema.jobs import JobSpec, Precision, Repetition
from mlcbench.schema.options import Options
from mlcbench.schema.results import (
    FINAL_STATUSES,
    Applied,
    CacheCounts,
    Clocks,
    CompileCost,
    Correctness,
    GpuInfo,
    Metrics,
    ProcessTiming,
    Provenance,
    Result,
    Status,
    Timing,
)
from mlcbench.schema.suites import Suite, SuiteEntry

__all__ = [
    "FAULT_WORKFLOWS",
    "FINAL_STATUSES",
    "Applied",
    "Calibration",
    "CacheCounts",
    "Clocks",
    "CompileCost",
    "GPUS",
    "MODELS",
    "SCHEMA_VERSION",
    "Correctness",
    "EnvSpec",
    "GpuInfo",
    "GpuPeaks",
    "JobSpec",
    "Metrics",
    "ModelInfo",
    "ModelKind",
    "Options",
    "OWN_WORKER_WORKFLOWS",
    "Precision",
    "ProcessTiming",
    "Provenance",
    "REFERENCE",
    "Repetition",
    "Result",
    "RunOptions",
    "Status",
    "StrictModel",
    "Suite",
    "SuiteEntry",
    "Timing",
    "WORKFLOWS",
    "WorkflowInfo",
    "gpu_tag_for_name",
    "why_not_run",
    "workflows_for",
]
