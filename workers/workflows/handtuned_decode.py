"""LLMs, a reference row rather than a compiler's result: torch_compile_decode's compiled step with mlcbench's own
Triton kernels (workers/kernels/) injected where a job turns them on (schema/options.py HandtunedDecodeOptions):
`triton_gemv` (the batch-1 projections, with the RMSNorm, SiLU*up and residual around them), `triton_attention` (each
layer's one-token RoPE, cache write and attention), `triton_gemm` (the projections and LM head of a step of up to 64
rows, split-K, instead of cuBLAS). It shows what hand-written kernels reach beside the compiler; reports draw it apart
and never rank it with the compilers. With `pdl` the kernels are launched with PDL too. CUDA only."""

from functools import partial

import torch

from mlcbench.schema import Applied
from mlcbench.schema.options import HandtunedDecodeOptions
from mlcbench.workers.decode.static_llama import Kernels, Unfit
from mlcbench.workers.interface import CausalLM, Unsupported, WorkflowContext
from mlcbench.workers.workflows.torch_compile_decode import TorchCompileDecode


class HandtunedDecode(TorchCompileDecode[HandtunedDecodeOptions]):
    def kernels(self, model: CausalLM, ctx: WorkflowContext[HandtunedDecodeOptions]) -> Kernels:
        options = ctx.options
        if ctx.device.type != "cuda":
            on = [name for name in HandtunedDecodeOptions.KERNELS if getattr(options, name)]
            raise Unsupported(f"{self.name}: {' and '.join(on)}: Triton kernels for CUDA GPUs; this job runs on "
                              f"{ctx.device.type}")
        pdl = options.pdl
        return Kernels(row_kernel=_row_kernel(pdl) if options.triton_gemv else None,
                       attention_kernel=_attention_kernel(model.config, pdl) if options.triton_attention else None,
                       gemm_kernel=_gemm_kernel(ctx, pdl) if options.triton_gemm else None)

    def applied_kernels(self, ctx: WorkflowContext[HandtunedDecodeOptions]) -> Applied:
        return Applied(**ctx.options.model_dump(include=set(HandtunedDecodeOptions.KERNELS)))


def _row_kernel(pdl: bool):
    from mlcbench.workers.kernels.gemv import gemv

    return partial(gemv, pdl=pdl)


def _attention_kernel(config, pdl: bool):
    """Unfit for heads the kernel does not implement."""
    from mlcbench.workers.kernels import attention

    attention.check_fits(config)
    return partial(attention.decode_attention, pdl=pdl)


def _gemm_kernel(ctx: WorkflowContext[HandtunedDecodeOptions], pdl: bool):
    """Unfit for a batch the kernel does not cover."""
    from mlcbench.workers.kernels import gemm

    if ctx.job.batch_size > gemm.MAX_ROWS:
        raise Unfit(f"triton_gemm: the kernel covers steps of up to {gemm.MAX_ROWS} rows; this job's batch is "
                    f"{ctx.job.batch_size}")
    sm_count = torch.cuda.get_device_properties(ctx.device).multi_processor_count
    return partial(gemm.linear, sm_count=sm_count, pdl=pdl)
