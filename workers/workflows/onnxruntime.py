"""ONNX Runtime on whatever this build offers: the CUDA EP with IO binding for GPU jobs, the CPU EP for CPU jobs."""

from mlcbench.workers.workflows.base import Workflow
from mlcbench.workers.stacks.onnx_export import export_onnx, require_provider, runner, session


class OnnxRuntime(Workflow):
    name = "onnxruntime"
    requires = ("onnxruntime", "onnxscript")

    def compile_module(self, module, inputs, ctx):
        provider = "CUDAExecutionProvider" if ctx.device.type == "cuda" else "CPUExecutionProvider"
        require_provider(provider)
        path = export_onnx(module, inputs, ctx)
        sess = session(path, [provider], ctx)
        return runner(sess, inputs, module(*inputs), ctx.job.options.io_binding, ctx)
