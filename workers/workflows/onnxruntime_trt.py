"""ONNX Runtime's TensorRT execution provider (CUDA and CPU EPs behind it for nodes TensorRT rejects).

Engines are built at the first run, for an explicit shape profile (1 x 1 up to the job's batch x sequence), and
cached in the env cache so a later job with the same model and shapes loads them instead of building."""

from typing import Any, Callable

import torch

from mlcbench.schema import Applied
from mlcbench.schema.options import OnnxRuntimeOptions
from mlcbench.workers.interface import Prepared, Unsupported, Workflow, WorkflowContext
from mlcbench.workers.stacks.onnx_export import export_synthetic, require_provider, runner, session

WORKSPACE_BYTES = 8 << 30


def profile_shapes(inputs: tuple[torch.Tensor, ...], smallest: bool) -> str:
    """TensorRT EP profile syntax: 'input_0:1x1x2048,input_1:...' (names as export_onnx gives them)."""
    shapes = []
    for index, tensor in enumerate(inputs):
        dims = list(tensor.shape)
        if smallest:
            dims[:2] = [1, 1]  # the dynamic batch and sequence axes
        shapes.append(f"input_{index}:" + "x".join(str(d) for d in dims))
    return ",".join(shapes)


class OnnxRuntimeTensorRT(Workflow[OnnxRuntimeOptions]):
    def compile_module(self, module: torch.nn.Module, inputs: tuple[torch.Tensor, ...],
                       ctx: WorkflowContext[OnnxRuntimeOptions]) -> Prepared[Callable[..., object]]:
        if ctx.dtype == torch.bfloat16:
            raise Unsupported("onnxruntime_trt: bf16 needs the TensorRT EP's bf16 mode and bf16 IO binding, which "
                              "this adapter does not set up")
        require_provider("TensorrtExecutionProvider")
        path, exported = export_synthetic(module, inputs, ctx, dynamic_batch_and_sequence=True)
        fp16 = ctx.dtype == torch.float16
        engines = ctx.cache_dir / "trt_engines"
        engines.mkdir(parents=True, exist_ok=True)
        trt_options: dict[str, Any] = {
            "device_id": ctx.device.index or 0,
            "trt_fp16_enable": fp16,
            "trt_engine_cache_enable": True,
            "trt_engine_cache_path": str(engines),
            "trt_max_workspace_size": WORKSPACE_BYTES,
            "trt_profile_min_shapes": profile_shapes(inputs, smallest=True),
            "trt_profile_opt_shapes": profile_shapes(inputs, smallest=False),
            "trt_profile_max_shapes": profile_shapes(inputs, smallest=False),
        }
        providers = [("TensorrtExecutionProvider", trt_options),
                     ("CUDAExecutionProvider", {"device_id": ctx.device.index or 0}), "CPUExecutionProvider"]
        sess, opened = session(path, providers)
        run, bound = runner(sess, inputs, module(*inputs), ctx.options.io_binding)
        # with fp16 enabled TensorRT may pick fp16-accumulating kernels: that alone can double a GeForce peak
        prepared = Prepared(run, Applied(accumulation="fp16" if fp16 else "fp32"),
                            notes={key: value for key, value in trt_options.items() if key != "device_id"})
        return prepared.fold(exported, opened, bound)
