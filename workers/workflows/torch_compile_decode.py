"""LLMs: the whole decode step compiled (gpt-fast's recipe). The HF model's own weights in a compact Llama with a
static KV cache in its buffers; forward, greedy token choice and position update are one graph with fullgraph,
replayed as a CUDA graph (mode reduce-overhead) with no host sync inside the loop; prefill compiled on its own with
dynamic shapes; coordinate-descent tuning on every generated kernel. Options turn techniques on or off, each recorded
in the result: `fused_projections` (default on), `pdl` (default off; Hopper and later only, refused elsewhere),
`triton_gemv` (default off; the batch-1 projections, with the RMSNorm, SiLU*up and residual around them, as
mlcbench's Triton kernel; CUDA only), `triton_attention` (default off; each layer's one-token RoPE, cache write and
attention as mlcbench's Triton kernel; CUDA only), `prefill_graph` (default off; the prefill replayed as a CUDA graph
per prompt shape; CUDA only), `triton_gemm` (default off; the projections and LM head of a step of up to 64 rows as
mlcbench's split-K Triton GEMM instead of cuBLAS; CUDA only). With `pdl` mlcbench's kernels are launched with PDL too.
Inductor's caches and dynamo's precompile cache live in the env's cache folder, so the next process loads the compiled
step instead of tracing the model again."""

from contextlib import contextmanager
from functools import partial
from typing import Optional

from mlcbench.workers.decode.compiled_step import TUNING, CompiledStepRunner, pdl_unavailable
from mlcbench.workers.decode.static_llama import AttentionKernel, GemmKernel, RowKernel, StaticLlama, Unfit
from mlcbench.workers.stacks.inductor_cache import job_shape, warm_start_caches
from mlcbench.schema import Applied, WorkflowOptions
from mlcbench.workers.interface import Prepared, Unsupported, Workflow


def eos_token_ids(model) -> list[int]:
    eos = model.generation_config.eos_token_id
    if eos is None:
        eos = model.config.eos_token_id
    return [] if eos is None else [eos] if isinstance(eos, int) else list(eos)


def row_kernel(options: WorkflowOptions) -> Optional[RowKernel]:
    """With `triton_gemv`, mlcbench's Triton kernel for the one-row projections (imported only then: it needs
    Triton); else None, Inductor's own."""
    if not options.triton_gemv:
        return None
    from mlcbench.workers.decode.gemv import gemv

    return partial(gemv, pdl=bool(options.pdl))


def attention_kernel(options: WorkflowOptions, config) -> Optional[AttentionKernel]:
    """With `triton_attention`, mlcbench's Triton kernel for the one-token attention (Unfit for heads it does not
    implement); else None, Inductor's own."""
    if not options.triton_attention:
        return None
    from mlcbench.workers.decode import attention

    attention.check_fits(config)
    return partial(attention.decode_attention, pdl=bool(options.pdl))


def gemm_kernel(options: WorkflowOptions, ctx) -> Optional[GemmKernel]:
    """With `triton_gemm`, mlcbench's Triton GEMM for the projections of a step (Unfit for a batch it does not
    cover); else None, cuBLAS."""
    if not options.triton_gemm:
        return None
    import torch

    from mlcbench.workers.decode import gemm

    if ctx.job.batch_size > gemm.MAX_ROWS:
        raise Unfit(f"triton_gemm: the kernel covers steps of up to {gemm.MAX_ROWS} rows; this job's batch is "
                    f"{ctx.job.batch_size}")
    sm_count = torch.cuda.get_device_properties(ctx.device).multi_processor_count
    return partial(gemm.linear, sm_count=sm_count, pdl=bool(options.pdl))


class TorchCompileDecode(Workflow):
    @contextmanager
    def compiling(self, ctx):
        with warm_start_caches(ctx.cache_dir, ctx.device, precompile_shape=job_shape(ctx.job)) as caches:
            yield caches

    def prepare_llm(self, model, ctx):
        options = ctx.job.options
        fused, pdl = options.fused_projections is not False, bool(options.pdl)
        # a cell named +PDL whose kernels are the base's would be a mislabelled measurement
        why_no_pdl = pdl_unavailable(ctx.device) if pdl else None
        if why_no_pdl:
            raise Unsupported(f"{self.name}: {why_no_pdl}")
        kernels = [name for name in ("triton_gemv", "triton_attention", "triton_gemm") if getattr(options, name)]
        if kernels and ctx.device.type != "cuda":
            raise Unsupported(f"{self.name}: {' and '.join(kernels)}: Triton kernels for CUDA GPUs; this job runs on "
                              f"{ctx.device.type}")
        prefill_graph = bool(options.prefill_graph)
        if prefill_graph and ctx.device.type != "cuda":
            raise Unsupported(f"{self.name}: prefill_graph: CUDA graphs need a CUDA GPU; this job runs on "
                              f"{ctx.device.type}")
        try:
            static = StaticLlama(model, ctx.job.input_len + ctx.job.output_len, fuse_projections=fused,
                                 row_kernel=row_kernel(options), attention_kernel=attention_kernel(options, model.config),
                                 gemm_kernel=gemm_kernel(options, ctx))
        except Unfit as unfit:
            raise Unsupported(f"{self.name}: {unfit}") from None
        # CUDA graphs need a GPU; on a CPU the same graphs run without them
        mode = options.compile_mode or ("reduce-overhead" if ctx.device.type == "cuda" else "default")
        return Prepared(CompiledStepRunner(static, eos_token_ids(model), mode, pdl, prefill_graph),
                        Applied(backend="inductor", compile_mode=mode, kv_cache="static", dynamic_shapes=False,
                                decode_loop="compiled_step", fused_projections=fused, pdl=pdl,
                                triton_gemv=bool(options.triton_gemv),
                                triton_attention=bool(options.triton_attention), prefill_graph=prefill_graph,
                                triton_gemm=bool(options.triton_gemm)),
                        notes=dict(TUNING))
