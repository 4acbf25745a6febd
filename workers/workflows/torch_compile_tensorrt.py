"""torch.compile with Torch-TensorRT's backend: TensorRT engines built at the first call (static shapes).

LLMs are refused: the backend traces graphs with aot_export_joint_simple, which rejects the in-place updates of a
static KV cache, and on a failed graph it quietly runs PyTorch instead (pass_through_build_failures=False), so a
generate() timing would not be a TensorRT timing. The torch_tensorrt workflow runs LLMs with its own decode loop.
"""

import torch

from mlcbench.schema import Applied
from mlcbench.workers.interface import Prepared, Workflow, require
from mlcbench.workers.stacks.trt_settings import compilation_settings


class TorchCompileTensorRT(Workflow):
    def compile_module(self, module, inputs, ctx):
        torch_tensorrt = require("torch_tensorrt", "import registers the 'tensorrt' torch.compile backend")
        options, configured = compilation_settings(torch_tensorrt, ctx)
        return Prepared(torch.compile(module, backend="tensorrt", dynamic=False, options=options),
                        Applied(backend="tensorrt", dynamic_shapes=False)).fold(configured)
