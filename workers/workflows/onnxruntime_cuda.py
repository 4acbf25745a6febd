"""ONNX Runtime's CUDA execution provider on an export with dynamic batch and sequence axes, IO binding by default."""

from mlcbench.workers.workflows.base import Unsupported, Workflow
from mlcbench.workers.stacks.onnx_export import export_onnx, require_provider, runner, session


class OnnxRuntimeCUDA(Workflow):
    name = "onnxruntime_cuda"
    requires = ("onnxruntime", "onnxscript")

    def compile_module(self, module, inputs, ctx):
        require_provider("CUDAExecutionProvider")
        path = export_onnx(module, inputs, ctx, dynamic_batch_and_sequence=True)
        providers = [("CUDAExecutionProvider", {"device_id": ctx.device.index or 0}), "CPUExecutionProvider"]
        sess = session(path, providers, ctx)
        ctx.settings["accumulation"] = "fp32"  # the CUDA EP runs fp16 GEMMs with fp32 compute (cuBLAS 32F)
        return runner(sess, inputs, module(*inputs), ctx.job.options.io_binding, ctx)

    def prepare_llm(self, model, ctx):
        raise Unsupported("onnxruntime_cuda: LLMs need an ONNX export with KV-cache inputs and outputs, which this "
                          "worker does not produce")
