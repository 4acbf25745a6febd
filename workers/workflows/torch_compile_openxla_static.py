"""torch_compile_openxla on a static KV cache: one prefill and one decode shape, so one graph each (LLMs only)."""

from mlcbench.workers.workflows.torch_compile_openxla import TorchCompileOpenXLA


class TorchCompileOpenXLAStatic(TorchCompileOpenXLA):
    cache = "static"
