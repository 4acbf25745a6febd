"""ONNX export and ONNX Runtime sessions, shared by the onnxruntime* workflows."""

import ctypes
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import torch

from mlcbench.schema import Applied
from mlcbench.schema.results import Setting
from mlcbench.workers.interface import Fragment, Unsupported, WorkflowContext, require

# ONNX element types by name (onnx.TensorProto): IO binding takes them as integers, which is how bf16 buffers are
# bound (numpy, ORT's other way to name a type, has no bf16)
ELEMENT_TYPES = {torch.float32: "FLOAT", torch.float16: "FLOAT16", torch.bfloat16: "BFLOAT16", torch.int64: "INT64"}
# the shared library behind each GPU provider, loaded by ORT when a session asks for the provider
PROVIDER_LIBRARIES = {"CUDAExecutionProvider": "libonnxruntime_providers_cuda.so",
                      "TensorrtExecutionProvider": "libonnxruntime_providers_tensorrt.so"}


def element_type(dtype: torch.dtype) -> int:
    onnx = require("onnx")
    if dtype not in ELEMENT_TYPES:
        raise Unsupported(f"onnxruntime: no IO binding for {dtype} tensors")
    return getattr(onnx.TensorProto, ELEMENT_TYPES[dtype])


def export_onnx(module: torch.nn.Module, args: tuple, ctx: WorkflowContext, input_names: Sequence[str],
                output_names: Sequence[str], shapes: str, dynamic_shapes: Optional[tuple] = None) -> tuple[Path, Fragment]:
    """torch.onnx's dynamo exporter, weights in a side file, and the Fragment that records the export. An export is
    kept in the env cache and reused by every job of the same model, precision, seed, shapes and torch version
    (several batch sizes, IO binding on and off, repeated processes): only the first of them pays for it."""
    require("onnxscript", "torch.onnx's dynamo exporter needs it")
    job = ctx.job
    parts = [job.model, job.precision, f"seed{job.seed}", job.device, shapes, f"torch{torch.__version__}"]
    key = re.sub(r"[^A-Za-z0-9.+_-]+", "_", "-".join(parts + ([job.model_path] if job.model_path else [])))
    folder = ctx.cache_dir.parent / "onnx" / key
    path = folder / "model.onnx"
    applied = Applied(export="onnx", dynamic_shapes=dynamic_shapes is not None)
    notes: dict[str, Setting] = {"onnx_export": f"dynamo ({shapes})", "onnx_export_cached": path.is_file()}
    if path.is_file():
        return path, Fragment(applied, notes)
    begin = time.perf_counter()
    partial = folder.with_name(f"{key}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    torch.onnx.export(module, args, str(partial / "model.onnx"), dynamo=True, dynamic_shapes=dynamic_shapes,
                      input_names=list(input_names), output_names=list(output_names), external_data=True)
    try:
        partial.rename(folder)  # whole or not at all: a process killed mid-export leaves only a .partial folder
    except OSError:  # another process finished the same export first
        shutil.rmtree(partial, ignore_errors=True)
    notes["onnx_export_s"] = round(time.perf_counter() - begin, 3)
    return path, Fragment(applied, notes)


def export_synthetic(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...], ctx: WorkflowContext,
                     dynamic_batch_and_sequence: bool = False) -> tuple[Path, Fragment]:
    """A synthetic model's graph: inputs input_0.., output "output"; static shapes, or dynamic batch and sequence."""
    dynamic_shapes, shapes = None, "static " + ",".join("x".join(map(str, t.shape)) for t in inputs)
    if dynamic_batch_and_sequence:
        batch, sequence = torch.export.Dim("batch"), torch.export.Dim("sequence")
        dynamic_shapes, shapes = tuple({0: batch, 1: sequence} for _ in inputs), "dynamic batch, sequence"
    return export_onnx(module, inputs, ctx, [f"input_{i}" for i in range(len(inputs))], ["output"], shapes,
                       dynamic_shapes)


def require_provider(provider: str):
    """The onnxruntime module, if this build lists the execution provider and its library loads (a GPU build lists
    its TensorRT EP where TensorRT is missing); checked before any export is paid for. GPU builds first load the CUDA
    libraries they were built for from the installed nvidia-* / torch packages."""
    ort = require("onnxruntime")
    if provider in PROVIDER_LIBRARIES and hasattr(ort, "preload_dlls"):
        ort.preload_dlls()
    available = ort.get_available_providers()
    if provider not in available:
        raise Unsupported(f"onnxruntime {ort.__version__} has no {provider} (available: {', '.join(available)})")
    why = _load_error(ort, provider)
    if why:
        raise Unsupported(f"onnxruntime {ort.__version__} lists {provider} but cannot load it: {why}")
    return ort


def cuda_provider(ctx: WorkflowContext) -> tuple[str, dict[str, Any]]:
    """The CUDA EP on the job's GPU and on torch's current stream: ORT's kernels are then ordered with torch's (the
    inputs torch writes, the CUDA events that time a call) without a device-wide sync."""
    options: dict[str, Any] = {"device_id": ctx.device.index or 0}
    if ctx.device.type == "cuda":
        options["user_compute_stream"] = str(torch.cuda.current_stream(ctx.device).cuda_stream)
    return ("CUDAExecutionProvider", options)


def _load_error(ort, provider: str) -> str:
    """Why the provider's library does not load (a missing TensorRT or CUDA library, usually), or '' if it does."""
    library = Path(ort.__file__).parent / "capi" / PROVIDER_LIBRARIES.get(provider, "")
    if not library.is_file():
        return ""
    try:
        ctypes.CDLL(str(library.with_name("libonnxruntime_providers_shared.so")), mode=ctypes.RTLD_GLOBAL)
        ctypes.CDLL(str(library))
    except OSError as error:
        return str(error)
    return ""


def session(path: Path, providers: list):
    """An InferenceSession whose first provider really was created (ORT lists a GPU provider whose libraries are
    missing, then silently runs the graph on the next one in the list), and the Fragment that records it."""
    wanted = providers[0] if isinstance(providers[0], str) else providers[0][0]
    ort = require_provider(wanted)
    sess = ort.InferenceSession(str(path), providers=providers)
    created = sess.get_providers()
    if wanted not in created:
        raise Unsupported(f"onnxruntime {ort.__version__} lists {wanted} but could not create it (the session got "
                          f"{', '.join(created)})")
    return sess, Fragment(Applied(backend="onnxruntime", execution_providers=tuple(created)),
                          {"onnxruntime": ort.__version__})


def bind_input(binding, name: str, tensor: torch.Tensor) -> None:
    """ORT reads the tensor's own buffer, wherever it lives, in any dtype ELEMENT_TYPES names (bf16 included)."""
    binding.bind_input(name, tensor.device.type, tensor.device.index or 0, element_type(tensor.dtype),
                       tuple(tensor.shape), tensor.data_ptr())


def bind_output(binding, name: str, tensor: torch.Tensor) -> None:
    binding.bind_output(name, tensor.device.type, tensor.device.index or 0, element_type(tensor.dtype),
                        tuple(tensor.shape), tensor.data_ptr())


def runner(sess, inputs: tuple[torch.Tensor, ...], reference: torch.Tensor,
           io_binding: bool) -> tuple[Callable[..., torch.Tensor], Fragment]:
    """A callable running the session on the given inputs, and the Fragment that records how it binds them.

    With IO binding, ORT reads the inputs and writes the output in torch's own buffers, on the device. Without it,
    inputs and output live in host memory: every call copies the inputs to the host and the output back (and a GPU
    provider copies them to the device and back), the paper's host-copy effect. Both bind buffers by their ONNX
    element type, so bf16 runs either way.
    """
    names = [i.name for i in sess.get_inputs()]
    output_name = sess.get_outputs()[0].name
    binding = sess.io_binding()
    bound = Fragment(Applied(io_binding=io_binding))
    if io_binding:
        inputs = tuple(tensor.contiguous() for tensor in inputs)
        output = torch.empty_like(reference)
        for name, tensor in zip(names, inputs):
            bind_input(binding, name, tensor)
        bind_output(binding, output_name, output)

        def run_bound(*_: torch.Tensor) -> torch.Tensor:
            sess.run_with_iobinding(binding)
            return output

        return run_bound, bound

    host_output = torch.empty_like(reference, device="cpu")

    def run_copied(*args: torch.Tensor) -> torch.Tensor:
        host_inputs = [tensor.detach().to("cpu").contiguous() for tensor in args]
        for name, tensor in zip(names, host_inputs):
            bind_input(binding, name, tensor)
        bind_output(binding, output_name, host_output)
        sess.run_with_iobinding(binding)
        return host_output.to(reference.device)

    return run_copied, bound
