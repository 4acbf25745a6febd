"""Hugging Face's compiled-generation recipe: a static KV cache, so every decode step has the same shapes, and the
decode forward compiled by generate() itself (CompileConfig, default mode reduce-overhead: CUDA graphs). Inductor's
caches live in the env's cache folder, so the next process compiles warm."""

from transformers import CompileConfig

from mlcbench.workers.decode.hf_generate import HFGenerateRunner
from mlcbench.workers.stacks.inductor_cache import use_cache_folder
from mlcbench.workers.workflows.base import Workflow


class TorchCompileStatic(Workflow):
    name = "torch_compile_static"

    def prepare_llm(self, model, ctx):
        use_cache_folder(ctx.cache_dir, ctx.device)
        mode = ctx.job.options.compile_mode or "reduce-overhead"
        config = CompileConfig(fullgraph=True, mode=mode)
        if ctx.device.type == "cpu":
            # generate() auto-compiles only on accelerators; this private switch lets the same recipe run on a CPU
            config._compile_all_devices = True
        ctx.apply(backend="inductor", compile_mode=mode, kv_cache="static", dynamic_shapes=False,
                  decode_loop="hf_generate")
        return HFGenerateRunner(model, cache_implementation="static", compile_config=config)
