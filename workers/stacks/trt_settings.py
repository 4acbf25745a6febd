"""Torch-TensorRT CompilationSettings for a job, shared by its JIT (torch.compile) and AOT workflows."""

import re

import torch

from mlcbench.schema import Applied
from mlcbench.schema.options import TensorrtOptions
from mlcbench.workers.interface import Fragment, WorkflowContext


def version_tuple(version: str) -> tuple[int, int]:
    match = re.match(r"(\d+)\.(\d+)", version)
    if match is None:
        raise ValueError(f"cannot parse version {version!r}")
    return int(match.group(1)), int(match.group(2))


def compilation_settings(torch_tensorrt, ctx: WorkflowContext[TensorrtOptions]) -> tuple[dict, Fragment]:
    """The keyword settings for torch_tensorrt.dynamo.compile / torch.compile(options=...), and the Fragment that
    records them with the result.

    Up to 2.9 TensorRT types layers weakly: enabled_precisions says which kernels it may pick. From 2.10
    use_explicit_typing is the default (layers keep the model's dtypes) and passing enabled_precisions raises.
    use_fp32_acc needs explicit typing on the older versions too.
    """
    options = ctx.options
    fp32_acc = options.fp32_accumulation
    settings: dict = {"min_block_size": options.min_block_size, "use_python_runtime": False,
                      "use_fp32_acc": fp32_acc}
    explicit_by_default = version_tuple(torch_tensorrt.__version__) >= (2, 10)
    if not explicit_by_default:
        if fp32_acc:
            settings.update(use_explicit_typing=True, enabled_precisions={torch.float32})
        else:
            settings["enabled_precisions"] = {ctx.dtype}
    notes = dict(
        torch_tensorrt=torch_tensorrt.__version__,
        min_block_size=settings["min_block_size"],
        use_python_runtime=False,
        use_fp32_acc=fp32_acc,
        use_explicit_typing=explicit_by_default or fp32_acc,
        enabled_precisions=",".join(sorted(str(d).replace("torch.", "") for d in settings.get("enabled_precisions", ())))
        or "not passed (explicit typing)",
    )
    # TensorRT may accumulate fp16 matmuls in fp16 unless told otherwise: that alone can double a GeForce peak
    accumulation = "fp16" if ctx.dtype == torch.float16 and not fp32_acc else "fp32"
    return settings, Fragment(Applied(accumulation=accumulation), notes)
