from typing import Callable

import torch

from mlcbench.schema import Applied
from mlcbench.schema.options import NoOptions
from mlcbench.workers.decode.hf_generate import HFGenerateRunner
from mlcbench.workers.interface import CausalLM, LLMRunner, Prepared, Workflow, WorkflowContext


class Eager(Workflow[NoOptions]):
    def compile_module(self, module: torch.nn.Module, inputs: tuple[torch.Tensor, ...],
                       ctx: WorkflowContext[NoOptions]) -> Prepared[Callable[..., object]]:
        return Prepared(module)

    def prepare_llm(self, model: CausalLM, ctx: WorkflowContext[NoOptions]) -> Prepared[LLMRunner]:
        return Prepared(HFGenerateRunner(model, disable_compile=True),
                        Applied(decode_loop="hf_generate", kv_cache="dynamic", dynamic_shapes=True))
