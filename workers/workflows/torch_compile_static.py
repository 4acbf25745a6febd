"""Hugging Face's compiled-generation recipe: a static KV cache, so every decode step has the same shapes, and the
decode forward compiled by generate() itself (CompileConfig, default mode reduce-overhead: CUDA graphs). Inductor's
caches live in the env's cache folder, so the next process compiles warm."""

from contextlib import contextmanager

from transformers import CompileConfig

from mlcbench.workers.decode.hf_generate import HFGenerateRunner
from mlcbench.workers.stacks.inductor_cache import warm_start_caches
from mlcbench.workers.workflows.base import Workflow


class TorchCompileStatic(Workflow):
    name = "torch_compile_static"

    @contextmanager
    def compiling(self, ctx):
        # not dynamo's precompile cache: the guards it saves for generate()'s compiled call name a closure variable
        # of transformers' wrapper that a later process cannot resolve (AttributeError on load; torch 2.13, 5.17)
        with warm_start_caches(ctx.cache_dir, ctx.device) as caches:
            ctx.apply(compile_caches=caches)
            yield

    def prepare_llm(self, model, ctx):
        mode = ctx.job.options.compile_mode or "reduce-overhead"
        config = CompileConfig(fullgraph=True, mode=mode)
        if ctx.device.type == "cpu":
            # generate() auto-compiles only on accelerators; this private switch lets the same recipe run on a CPU
            config._compile_all_devices = True
        ctx.apply(backend="inductor", compile_mode=mode, kv_cache="static", dynamic_shapes=False,
                  decode_loop="hf_generate")
        return HFGenerateRunner(model, cache_implementation="static", compile_config=config)
