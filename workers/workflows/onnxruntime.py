"""ONNX Runtime on whatever this build offers: the CUDA EP for GPU jobs, the CPU EP for CPU jobs; static shapes.
LLMs: the decoder exported with its KV cache as inputs and outputs, greedy decode through IO binding."""

from typing import Callable

import torch

from mlcbench.schema.options import OnnxRuntimeOptions
from mlcbench.workers.decode import onnx_decoder
from mlcbench.workers.interface import CausalLM, LLMRunner, Prepared, Workflow, WorkflowContext
from mlcbench.workers.stacks.onnx_export import cuda_provider, export_synthetic, require_provider, runner, session


def _providers(ctx: WorkflowContext[OnnxRuntimeOptions]) -> list:
    if ctx.device.type == "cuda":
        require_provider("CUDAExecutionProvider")
        return [cuda_provider(ctx), "CPUExecutionProvider"]
    require_provider("CPUExecutionProvider")
    return ["CPUExecutionProvider"]


class OnnxRuntime(Workflow[OnnxRuntimeOptions]):
    def compile_module(self, module: torch.nn.Module, inputs: tuple[torch.Tensor, ...],
                       ctx: WorkflowContext[OnnxRuntimeOptions]) -> Prepared[Callable[..., object]]:
        providers = _providers(ctx)
        path, exported = export_synthetic(module, inputs, ctx)
        sess, opened = session(path, providers)
        run, bound = runner(sess, inputs, module(*inputs), ctx.options.io_binding)
        return Prepared(run).fold(exported, opened, bound)

    def prepare_llm(self, model: CausalLM, ctx: WorkflowContext[OnnxRuntimeOptions]) -> Prepared[LLMRunner]:
        return onnx_decoder.prepare(model, _providers(ctx), ctx)
