"""torch.compile with inductor.

Synthetic models: the module compiled whole (static shapes). LLMs: the paper's recipe, the forward compiled and driven
by generate() with the default dynamic cache, whose growing shapes force recompiles and dynamic-shape graphs.
"""

import torch

from workers.workflows.base import Workflow
from workers.workflows.hf_generate import HFGenerateRunner


class TorchCompile(Workflow):
    name = "torch_compile"

    def compile_module(self, module, inputs, ctx):
        mode = ctx.job.options.compile_mode or "default"
        ctx.settings.update(backend="inductor", compile_mode=mode)
        return torch.compile(module, mode=mode, dynamic=False)

    def prepare_llm(self, model, ctx):
        mode = ctx.job.options.compile_mode or "default"
        ctx.settings.update(backend="inductor", compile_mode=mode, cache="dynamic", decode_loop="hf_generate")
        model.forward = torch.compile(model.forward, mode=mode)
        return HFGenerateRunner(model, disable_compile=True)
