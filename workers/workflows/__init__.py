"""Workflow registry: name -> module:class, imported only when a job asks for it."""

import importlib
import importlib.util
import os
import sys

from mlcbench.schema import WORKFLOWS
from mlcbench.workers.workflows.base import Unsupported, Workflow

_MODULES: dict[str, str] = {
    "eager": "eager:Eager",
    "torch_compile": "torch_compile:TorchCompile",
    "torch_compile_forward": "torch_compile_forward:TorchCompileForward",
    "torch_compile_static": "torch_compile_static:TorchCompileStatic",
    "aot_inductor": "aot_inductor:AOTInductor",
    "onnxruntime": "onnxruntime:OnnxRuntime",
    "onnxruntime_cuda": "onnxruntime_cuda:OnnxRuntimeCUDA",
    "onnxruntime_trt": "onnxruntime_trt:OnnxRuntimeTensorRT",
    "torch_compile_tensorrt": "torch_compile_tensorrt:TorchCompileTensorRT",
    "torch_tensorrt": "torch_tensorrt:TorchTensorRT",
    "tensorrt_llm": "tensorrt_llm:TensorRTLLM",
    "torch_compile_openxla": "torch_compile_openxla:TorchCompileOpenXLA",
    "torchax": "torchax:Torchax",
}
_FAULTS: dict[str, str] = {
    "fault-kill": "faults:KillSelf",
    "fault-segfault": "faults:Segfault",
    "fault-hang": "faults:Hang",
    "fault-oom": "faults:OutOfMemory",
}
FAULTS_ENV = "MLCBENCH_TEST_FAULTS"


def registered() -> dict[str, str]:
    modules = dict(_MODULES)
    if os.environ.get(FAULTS_ENV) == "1":
        modules.update(_FAULTS)
    return modules


def load(name: str) -> Workflow:
    target = registered().get(name)
    if target is None:
        known = name in WORKFLOWS
        raise Unsupported(f"workflow {name!r} is {'not implemented in this worker yet' if known else 'unknown'}")
    module_name, class_name = target.split(":")
    try:
        module = importlib.import_module(f"{__name__}.{module_name}")
    except ImportError as error:
        raise Unsupported(f"{name}: {error.name or error} not importable in this environment") from None
    workflow = getattr(module, class_name)()
    missing = [package for package in workflow.requires if not _installed(package)]
    if missing:
        raise Unsupported(f"{name}: {', '.join(missing)} not importable in this environment")
    return workflow


def _installed(package: str) -> bool:
    """Importable, judged without importing it (a stand-in already in sys.modules counts)."""
    if package in sys.modules:
        return sys.modules[package] is not None
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False
