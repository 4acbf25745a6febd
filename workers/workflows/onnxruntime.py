"""ONNX Runtime on whatever this build offers: the CUDA EP for GPU jobs, the CPU EP for CPU jobs; static shapes.
LLMs: the decoder exported with its KV cache as inputs and outputs, greedy decode through IO binding."""

from mlcbench.workers.decode import onnx_decoder
from mlcbench.workers.stacks.onnx_export import cuda_provider, export_synthetic, require_provider, runner, session
from mlcbench.workers.interface import Prepared, Workflow


def _providers(ctx) -> list:
    if ctx.device.type == "cuda":
        require_provider("CUDAExecutionProvider")
        return [cuda_provider(ctx), "CPUExecutionProvider"]
    require_provider("CPUExecutionProvider")
    return ["CPUExecutionProvider"]


class OnnxRuntime(Workflow):
    def compile_module(self, module, inputs, ctx):
        providers = _providers(ctx)
        path, exported = export_synthetic(module, inputs, ctx)
        sess, opened = session(path, providers)
        run, bound = runner(sess, inputs, module(*inputs), ctx.options.io_binding)
        return Prepared(run).fold(exported, opened, bound)

    def prepare_llm(self, model, ctx):
        return onnx_decoder.prepare(model, _providers(ctx), ctx)
