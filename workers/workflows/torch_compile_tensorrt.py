"""torch.compile with Torch-TensorRT's backend: TensorRT engines built at the first call (static shapes).

LLMs are refused: the backend traces graphs with aot_export_joint_simple, which rejects the in-place updates of a
static KV cache, and on a failed graph it quietly runs PyTorch instead (pass_through_build_failures=False), so a
generate() timing would not be a TensorRT timing. The torch_tensorrt workflow runs LLMs with its own decode loop.
"""

from typing import Callable

import torch

from mlcbench.schema import Applied
from mlcbench.schema.options import TensorrtOptions
from mlcbench.workers.interface import Prepared, Workflow, WorkflowContext, require
from mlcbench.workers.stacks.trt_settings import compilation_settings


class TorchCompileTensorRT(Workflow[TensorrtOptions]):
    def compile_module(self, module: torch.nn.Module, inputs: tuple[torch.Tensor, ...],
                       ctx: WorkflowContext[TensorrtOptions]) -> Prepared[Callable[..., object]]:
        torch_tensorrt = require("torch_tensorrt", "import registers the 'tensorrt' torch.compile backend")
        options, configured = compilation_settings(torch_tensorrt, ctx)
        return Prepared(torch.compile(module, backend="tensorrt", dynamic=False, options=options),
                        Applied(backend="tensorrt", dynamic_shapes=False)).fold(configured)
