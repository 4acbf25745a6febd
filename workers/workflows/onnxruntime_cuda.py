"""ONNX Runtime's CUDA execution provider on an export with dynamic batch and sequence axes, IO binding by default.
LLMs: the decoder exported with its KV cache as inputs and outputs, greedy decode through IO binding."""

from typing import Callable

import torch

from mlcbench.schema import Applied
from mlcbench.schema.options import OnnxRuntimeOptions
from mlcbench.workers.decode import onnx_decoder
from mlcbench.workers.interface import CausalLM, LLMRunner, Prepared, Workflow, WorkflowContext
from mlcbench.workers.stacks.onnx_export import cuda_provider, export_synthetic, require_provider, runner, session


class OnnxRuntimeCUDA(Workflow[OnnxRuntimeOptions]):
    def compile_module(self, module: torch.nn.Module, inputs: tuple[torch.Tensor, ...],
                       ctx: WorkflowContext[OnnxRuntimeOptions]) -> Prepared[Callable[..., object]]:
        require_provider("CUDAExecutionProvider")
        path, exported = export_synthetic(module, inputs, ctx, dynamic_batch_and_sequence=True)
        sess, opened = session(path, [cuda_provider(ctx), "CPUExecutionProvider"])
        run, bound = runner(sess, inputs, module(*inputs), ctx.options.io_binding)
        # the CUDA EP runs fp16 GEMMs with fp32 compute (cuBLAS 32F)
        return Prepared(run, Applied(accumulation="fp32")).fold(exported, opened, bound)

    def prepare_llm(self, model: CausalLM, ctx: WorkflowContext[OnnxRuntimeOptions]) -> Prepared[LLMRunner]:
        require_provider("CUDAExecutionProvider")
        return onnx_decoder.prepare(model, [cuda_provider(ctx), "CPUExecutionProvider"], ctx)
