"""torch_compile_openxla on a static KV cache: one prefill and one decode shape, so one graph each (LLMs only)."""

from mlcbench.workers.workflows.base import Workflow
from mlcbench.workers.workflows.torch_compile_openxla import TorchCompileOpenXLA


class TorchCompileOpenXLAStatic(TorchCompileOpenXLA):
    name = "torch_compile_openxla_static"
    cache = "static"
    compile_module = Workflow.compile_module  # LLMs only: a synthetic model has no cache
