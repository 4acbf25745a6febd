"""ONNX export and ONNX Runtime sessions, shared by the onnxruntime* workflows."""

from pathlib import Path
from typing import Callable, Optional

import torch

from mlcbench.workers.workflows.base import Unsupported, WorkflowContext, require

NUMPY_DTYPES = {torch.float32: "float32", torch.float16: "float16"}


def export_onnx(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...], ctx: WorkflowContext,
                dynamic_batch_and_sequence: bool = False) -> Path:
    """Export once per job into the env cache (the dynamo exporter; weights inline)."""
    require("onnxscript", "torch.onnx's dynamo exporter needs it")
    path = ctx.cache_dir / "onnx" / f"{ctx.job.job_id}.onnx"
    path.parent.mkdir(parents=True, exist_ok=True)
    dynamic_shapes = None
    if dynamic_batch_and_sequence:
        batch, sequence = torch.export.Dim("batch"), torch.export.Dim("sequence")
        dynamic_shapes = tuple({0: batch, 1: sequence} for _ in inputs)
    torch.onnx.export(module, inputs, str(path), dynamo=True, dynamic_shapes=dynamic_shapes,
                      input_names=[f"input_{i}" for i in range(len(inputs))], output_names=["output"],
                      external_data=False)
    ctx.settings["onnx_export"] = "dynamo" + (" (dynamic batch, sequence)" if dynamic_batch_and_sequence else "")
    return path


def require_provider(provider: str):
    """The onnxruntime module, if this build has the execution provider; checked before any export is paid for."""
    ort = require("onnxruntime")
    available = ort.get_available_providers()
    if provider not in available:
        raise Unsupported(f"onnxruntime {ort.__version__} has no {provider} (available: {', '.join(available)})")
    return ort


def session(path: Path, providers: list, ctx: WorkflowContext):
    ort = require_provider(providers[0] if isinstance(providers[0], str) else providers[0][0])
    sess = ort.InferenceSession(str(path), providers=providers)
    ctx.settings["execution_providers"] = ",".join(sess.get_providers())
    ctx.settings["onnxruntime"] = ort.__version__
    return sess


def runner(sess, inputs: tuple[torch.Tensor, ...], reference: torch.Tensor, io_binding: bool,
           ctx: WorkflowContext) -> Callable[..., torch.Tensor]:
    """A callable running the session on the given device-resident inputs.

    With IO binding, inputs and the output stay on the GPU (ORT reads and writes torch's buffers); without it,
    every call copies inputs to the host and the output back, the paper's host-copy effect.
    """
    names = [i.name for i in sess.get_inputs()]
    output_name = sess.get_outputs()[0].name
    on_gpu = inputs[0].is_cuda
    ctx.settings["io_binding"] = bool(io_binding and on_gpu)
    if io_binding and on_gpu:
        dtype = NUMPY_DTYPES.get(inputs[0].dtype)
        if dtype is None:
            raise Unsupported(f"IO binding of {inputs[0].dtype} tensors is not supported by this adapter")
        output = torch.empty_like(reference)
        binding = sess.io_binding()
        for name, tensor in zip(names, inputs):
            tensor = tensor.contiguous()
            binding.bind_input(name, "cuda", tensor.device.index or 0, dtype, tuple(tensor.shape), tensor.data_ptr())
        binding.bind_output(output_name, "cuda", output.device.index or 0, dtype, tuple(output.shape), output.data_ptr())

        def run_bound(*_: torch.Tensor) -> torch.Tensor:
            sess.run_with_iobinding(binding)
            return output

        return run_bound

    device: Optional[torch.device] = inputs[0].device

    def run_copied(*args: torch.Tensor) -> torch.Tensor:
        feeds = {name: tensor.detach().cpu().numpy() for name, tensor in zip(names, args)}
        (out,) = sess.run([output_name], feeds)
        return torch.from_numpy(out).to(device)

    return run_copied
