"""LLMs: the whole decode step compiled (gpt-fast's recipe). The HF model's own weights in a compact Llama with a
static KV cache in its buffers; forward, greedy token choice and position update are one graph with fullgraph,
replayed as a CUDA graph (mode reduce-overhead) with no host sync inside the loop; prefill compiled on its own with
dynamic shapes; coordinate-descent tuning on every generated kernel. Its options (schema/options.py
TorchCompileDecodeOptions) turn stock techniques on or off, each recorded in the result: `fused_projections` (default
on), `pdl` (default off; Hopper and later only, refused elsewhere), `prefill_graph` (default off; the prefill replayed
as a CUDA graph per prompt shape; CUDA only). Every kernel is Inductor's or cuBLAS's: mlcbench's own are the
handtuned_decode row's. Inductor's caches and dynamo's precompile cache live in the env's cache folder, so the next
process loads the compiled step instead of tracing the model again."""

from contextlib import contextmanager
from typing import Iterator, TypeVar


from mlcbench.schema import Applied
from mlcbench.schema.options import TorchCompileDecodeOptions
from mlcbench.workers.decode.compiled_step import TUNING, CompiledStepRunner, pdl_unavailable
from mlcbench.workers.decode.static_llama import Kernels, StaticLlama, Unfit
from mlcbench.workers.interface import CausalLM, LLMRunner, Prepared, Unsupported, Workflow, WorkflowContext
from mlcbench.workers.stacks.inductor_cache import job_shape, warm_start_caches

# torch_compile_decode's options, or those of a workflow built on it (handtuned_decode's)
DecodeOptionsT = TypeVar("DecodeOptionsT", bound=TorchCompileDecodeOptions)


def eos_token_ids(model) -> list[int]:
    eos = model.generation_config.eos_token_id
    if eos is None:
        eos = model.config.eos_token_id
    return [] if eos is None else [eos] if isinstance(eos, int) else list(eos)


class TorchCompileDecode(Workflow[DecodeOptionsT]):
    @contextmanager
    def compiling(self, ctx: WorkflowContext[DecodeOptionsT]) -> Iterator[tuple[str, ...]]:
        with warm_start_caches(ctx.cache_dir, ctx.device, precompile_shape=job_shape(ctx.job)) as caches:
            yield caches

    def kernels(self, model: CausalLM, ctx: WorkflowContext[DecodeOptionsT]) -> Kernels:
        """The kernels injected into the step in place of Inductor's and cuBLAS's: none, the compiler's own."""
        return Kernels()

    def applied_kernels(self, ctx: WorkflowContext[DecodeOptionsT]) -> Applied:
        """What the result records of the injected kernels: nothing, none is."""
        return Applied()

    def prepare_llm(self, model: CausalLM, ctx: WorkflowContext[DecodeOptionsT]) -> Prepared[LLMRunner]:
        options = ctx.options
        fused, pdl, prefill_graph = options.fused_projections, options.pdl, options.prefill_graph
        # a cell named +PDL whose kernels are the base's would be a mislabelled measurement
        why_no_pdl = pdl_unavailable(ctx.device) if pdl else None
        if why_no_pdl:
            raise Unsupported(f"{self.name}: {why_no_pdl}")
        if prefill_graph and ctx.device.type != "cuda":
            raise Unsupported(f"{self.name}: prefill_graph: CUDA graphs need a CUDA GPU; this job runs on "
                              f"{ctx.device.type}")
        try:
            static = StaticLlama(model, ctx.job.input_len + ctx.job.output_len, fuse_projections=fused,
                                 **self.kernels(model, ctx)._asdict())
        except Unfit as unfit:
            raise Unsupported(f"{self.name}: {unfit}") from None
        mode = options.mode_on(ctx.device.type)
        applied = Applied(backend="inductor", compile_mode=mode, kv_cache="static", dynamic_shapes=False,
                          decode_loop="compiled_step", fused_projections=fused, pdl=pdl, prefill_graph=prefill_graph)
        return Prepared(CompiledStepRunner(static, eos_token_ids(model), mode, pdl, prefill_graph),
                        applied.model_copy(update=self.applied_kernels(ctx).model_dump(exclude_unset=True)),
                        notes=dict(TUNING))
