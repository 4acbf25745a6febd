"""Each workflow's options: one model per set of knobs, named by the catalog rows that read it (WorkflowInfo.options).
A knob lives in the class of the workflows whose code reads it, so a job can only set what its workflow reads.

Every job carries its options as one record, WorkflowOptions: the union of these classes' fields. Stored results and
job ids were written in that one shape, so it stays the shape jobs are stored and hashed in."""

from typing import Any, ClassVar, Literal, Optional

from pydantic import Field, create_model

from mlcbench.schema.base import StrictModel

CompileMode = Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]


class NoOptions(StrictModel):
    """A workflow with no knobs: any option set on it is refused."""


class TorchCompileOptions(StrictModel):
    # None: the workflow's own default mode
    compile_mode: Optional[CompileMode] = None


class OnnxRuntimeOptions(StrictModel):
    # inputs and outputs bound to device buffers, so a run copies nothing through the host
    io_binding: bool = True


class TensorrtOptions(StrictModel):
    # None: Torch-TensorRT's default of 5 ops per TensorRT block
    min_block_size: Optional[int] = Field(default=None, ge=1)
    # fp16 matmuls accumulated in fp32 (TensorRT may otherwise accumulate in fp16)
    fp32_accumulation: Optional[bool] = None


class TorchCompileDecodeOptions(TorchCompileOptions):
    """The stock techniques of the compiled decode step, each one step of its ablation (WorkflowInfo.techniques)."""

    # q/k/v and gate/up each one GEMM over weights concatenated at load (None: on)
    fused_projections: Optional[bool] = None
    # programmatic dependent launch in Inductor's Triton kernels (Hopper and later)
    pdl: Optional[bool] = None
    # the prefill replayed as a CUDA graph, one per prompt shape, instead of launched kernel by kernel from the host
    prefill_graph: Optional[bool] = None

    # the ablation's rungs, in the order it adds them (WorkflowInfo.techniques); a new technique goes at the end
    TECHNIQUES: ClassVar[tuple[str, ...]] = ("fused_projections", "pdl", "prefill_graph")


class HandtunedDecodeOptions(TorchCompileDecodeOptions):
    """The compiled decode step with mlcbench's own Triton kernels (workers/kernels/) injected: a reference for what
    hand-written kernels reach, not a compiler's result. At least one kernel is on (with none it is
    torch_compile_decode)."""

    # the batch-1 projections, with the RMSNorm, SiLU*up and residual around them, instead of Inductor's reduction
    triton_gemv: Optional[bool] = None
    # each layer's one-token RoPE, cache write and attention instead of Inductor's six kernels
    triton_attention: Optional[bool] = None
    # the projections and LM head of a step of up to 64 rows through a split-K GEMM instead of cuBLAS
    triton_gemm: Optional[bool] = None

    KERNELS: ClassVar[tuple[str, ...]] = ("triton_gemv", "triton_attention", "triton_gemm")
    # its ablation climbs from the compiled step with its stock techniques through the kernels
    TECHNIQUES: ClassVar[tuple[str, ...]] = KERNELS


# Every options class; WorkflowOptions is their union
OPTION_CLASSES: tuple[type[StrictModel], ...] = (TorchCompileOptions, OnnxRuntimeOptions, TensorrtOptions,
                                                 TorchCompileDecodeOptions, HandtunedDecodeOptions)
# The options the first stores hashed into every job id, set or not
_ALWAYS_HASHED = ("compile_mode", "io_binding", "min_block_size", "fp32_accumulation")
# The order job ids hash the later options in, as they were added; an option added since goes after them by itself
_HASH_ORDER = (*_ALWAYS_HASHED, "fused_projections", "pdl", "triton_gemv", "triton_attention", "prefill_graph",
               "triton_gemm")


def _union_fields() -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for options in OPTION_CLASSES:
        for name, field in options.model_fields.items():
            fields.setdefault(name, (field.annotation, field))
    order = [*_HASH_ORDER, *(name for name in fields if name not in _HASH_ORDER)]
    return {name: fields[name] for name in order}


class _OptionsRecord(StrictModel):
    """Every knob any workflow reads (None: the workflow's own default); each is recorded with the result."""

    # options added after stores were written: left out of a job's identity while None, so old job ids stay valid
    LATER: ClassVar[tuple[str, ...]]

    def non_default(self) -> str:
        """The options set away from their defaults, in words ("io_binding=False"); empty when none is."""
        return ", ".join(f"{name}={value}" for name, value in self.model_dump(exclude_defaults=True).items())


WorkflowOptions = create_model("WorkflowOptions", __base__=_OptionsRecord, **_union_fields())
WorkflowOptions.LATER = tuple(name for name in WorkflowOptions.model_fields if name not in _ALWAYS_HASHED)
