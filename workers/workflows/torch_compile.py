"""torch.compile with inductor.

Synthetic models: the module compiled whole (static shapes). LLMs: the paper's recipe taken literally,
`torch.compile(model)` then `.generate()` with the default dynamic cache. generate() is not a forward: the compiled
wrapper hands it to the original module, which calls its own, uncompiled forward, so nothing is compiled (the result
records compiled_graphs = 0) and the speedup is ~1.0x. That is why the paper saw none; torch_compile_forward compiles
the forward itself.
"""

from typing import Callable

import torch

from mlcbench.schema import Applied
from mlcbench.schema.options import TorchCompileOptions
from mlcbench.workers.decode.hf_generate import HFGenerateRunner
from mlcbench.workers.interface import CausalLM, LLMRunner, Prepared, Workflow, WorkflowContext


class TorchCompile(Workflow[TorchCompileOptions]):
    def compile_module(self, module: torch.nn.Module, inputs: tuple[torch.Tensor, ...],
                       ctx: WorkflowContext[TorchCompileOptions]) -> Prepared[Callable[..., object]]:
        mode = ctx.options.compile_mode
        return Prepared(torch.compile(module, mode=mode, dynamic=False),
                        Applied(backend="inductor", compile_mode=mode, dynamic_shapes=False))

    def prepare_llm(self, model: CausalLM, ctx: WorkflowContext[TorchCompileOptions]) -> Prepared[LLMRunner]:
        mode = ctx.options.compile_mode
        return Prepared(HFGenerateRunner(torch.compile(model, mode=mode)),
                        Applied(backend="inductor", compile_mode=mode, kv_cache="dynamic", dynamic_shapes=True,
                                decode_loop="hf_generate"),
                        notes={"compiled": "torch.compile(model), then model.generate()"})
