"""Each workflow's options: one model per set of knobs, named by the catalog rows that read it (WorkflowInfo.options).
A knob lives in the class of the workflows whose code reads it, so a job can only set what its workflow reads, and a
job carries its options as its workflow's own class (JobSpec.options)."""

from typing import ClassVar, Literal, Optional

from pydantic import Field

from mlcbench.schema.base import StrictModel

CompileMode = Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]


class Options(StrictModel):
    """The base of every workflow's options (None: the workflow's own default); each is recorded with the result."""

    # the options that run on a CUDA GPU only: a job on a CPU that turns one on is refused before any worker starts
    GPU_ONLY: ClassVar[tuple[str, ...]] = ()

    def non_default(self) -> str:
        """The options set away from their defaults, in words ("io_binding=False"); empty when none is."""
        return ", ".join(f"{name}={value}" for name, value in self.model_dump(exclude_defaults=True).items())


class NoOptions(Options):
    """A workflow with no knobs: any option set on it is refused."""


class TorchCompileOptions(Options):
    # None: the workflow's own default mode
    compile_mode: Optional[CompileMode] = None


class OnnxRuntimeOptions(Options):
    # inputs and outputs bound to device buffers, so a run copies nothing through the host
    io_binding: bool = True


class TensorrtOptions(Options):
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
    GPU_ONLY: ClassVar[tuple[str, ...]] = ("pdl", "prefill_graph")


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
    GPU_ONLY: ClassVar[tuple[str, ...]] = (*TorchCompileDecodeOptions.GPU_ONLY, *KERNELS)
    # its ablation climbs from the compiled step with its stock techniques through the kernels
    TECHNIQUES: ClassVar[tuple[str, ...]] = KERNELS



# Every options class
OPTION_CLASSES: tuple[type[Options], ...] = (NoOptions, TorchCompileOptions, OnnxRuntimeOptions, TensorrtOptions,
                                             TorchCompileDecodeOptions, HandtunedDecodeOptions)
