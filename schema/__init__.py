"""Pydantic models shared by the host orchestrator and the in-container worker.

Pure data and validation: this package imports pydantic and the standard library only, so that it loads in
every environment image (Python 3.10-3.12).
"""

from mlcbench.schema.base import SCHEMA_VERSION, StrictModel
from mlcbench.schema.catalog import (
    FAULT_WORKFLOWS,
    GPUS,
    MODELS,
    OWN_WORKER_WORKFLOWS,
    WORKFLOWS,
    GpuPeaks,
    ModelInfo,
    ModelKind,
    WorkflowInfo,
    gpu_tag_for_name,
    workflows_for,
)
from mlcbench.schema.envs import EnvSpec, RunOptions
from mlcbench.schema.jobs import JobSpec, Precision, WorkflowOptions
from mlcbench.schema.results import (
    FINAL_STATUSES,
    Applied,
    Correctness,
    GpuInfo,
    Metrics,
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
    "OWN_WORKER_WORKFLOWS",
    "Precision",
    "Provenance",
    "Result",
    "RunOptions",
    "Status",
    "StrictModel",
    "Suite",
    "SuiteEntry",
    "Timing",
    "WORKFLOWS",
    "WorkflowInfo",
    "WorkflowOptions",
    "gpu_tag_for_name",
    "workflows_for",
]
