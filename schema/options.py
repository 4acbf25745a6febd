"""Each workflow's options: one model per set of knobs, named by the catalog rows that read it (WorkflowInfo.options).
A knob lives in the class of the workflows whose code reads it, so a job can only set what its workflow reads, and a
job carries its options as its workflow's own class (JobSpec.options). Each default is the value the workflow runs
with, so a job that sets an option to its default is the same job as one that leaves it out."""

from typing import ClassVar, Literal, Optional

from pydantic import Field

from mlcbench.schema.base import StrictModel

CompileMode = Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]


class Options(StrictModel):
    """The base of every workflow's options; each is recorded with the result."""

    # the options that run on a CUDA GPU only: a job on a CPU that turns one on is refused before any worker starts
    GPU_ONLY: ClassVar[tuple[str, ...]] = ()

    def non_default(self) -> str:
        """The options set away from their defaults, in words ("io_binding=False"); empty when none is."""
        return ", ".join(f"{name}={value}" for name, value in self.model_dump(exclude_defaults=True).items())


class NoOptions(Options):
    """A workflow with no knobs: any option set on it is refused."""


class TorchCompileOptions(Options):
    compile_mode: CompileMode = "default"


class TorchCompileStaticOptions(TorchCompileOptions):
    # Hugging Face's compiled generation replays CUDA graphs unless told otherwise
    compile_mode: CompileMode = "reduce-overhead"


class OnnxRuntimeOptions(Options):
    # inputs and outputs bound to device buffers, so a run copies nothing through the host
    io_binding: bool = True


class TensorrtOptions(Options):
    # the fewest ops a TensorRT block takes (Torch-TensorRT's default)
    min_block_size: int = Field(default=5, ge=1)
    # fp16 matmuls accumulated in fp32 (TensorRT may otherwise accumulate in fp16)
    fp32_accumulation: bool = False


class TorchCompileDecodeOptions(Options):
    """The stock techniques of the compiled decode step, each one step of its ablation (WorkflowInfo.techniques)."""

    # None: the device's choice (mode_on), left out of the job's identity
    compile_mode: Optional[CompileMode] = None
    # q/k/v and gate/up each one GEMM over weights concatenated at load
    fused_projections: bool = True
    # programmatic dependent launch in Inductor's Triton kernels (Hopper and later)
    pdl: bool = False
    # the prefill replayed as a CUDA graph, one per prompt shape, instead of launched kernel by kernel from the host
    prefill_graph: bool = False

    # the ablation's rungs, in the order it adds them (WorkflowInfo.techniques); a new technique goes at the end
    TECHNIQUES: ClassVar[tuple[str, ...]] = ("fused_projections", "pdl", "prefill_graph")
    GPU_ONLY: ClassVar[tuple[str, ...]] = ("pdl", "prefill_graph")

    def mode_on(self, device_type: str) -> CompileMode:
        """The compile mode on this device: CUDA graphs on a GPU, which a CPU has none of."""
        return self.compile_mode or ("reduce-overhead" if device_type == "cuda" else "default")


class HandtunedDecodeOptions(TorchCompileDecodeOptions):
    """The compiled decode step with mlcbench's own Triton kernels (workers/kernels/) injected: a reference for what
    hand-written kernels reach, not a compiler's result. At least one kernel is on (with none it is
    torch_compile_decode)."""

    # the batch-1 projections, with the RMSNorm, SiLU*up and residual around them, instead of Inductor's reduction
    triton_gemv: bool = False
    # each layer's one-token RoPE, cache write and attention instead of Inductor's six kernels
    triton_attention: bool = False
    # the projections and LM head of a step of up to 64 rows through a split-K GEMM instead of cuBLAS
    triton_gemm: bool = False

    KERNELS: ClassVar[tuple[str, ...]] = ("triton_gemv", "triton_attention", "triton_gemm")
    GPU_ONLY: ClassVar[tuple[str, ...]] = (*TorchCompileDecodeOptions.GPU_ONLY, *KERNELS)
    # its ablation climbs from the compiled step with its stock techniques through the kernels
    TECHNIQUES: ClassVar[tuple[str, ...]] = KERNELS


# Every options class
OPTION_CLASSES: tuple[type[Options], ...] = (NoOptions, TorchCompileOptions, TorchCompileStaticOptions,
                                             OnnxRuntimeOptions, TensorrtOptions, TorchCompileDecodeOptions,
                                             HandtunedDecodeOptions)
