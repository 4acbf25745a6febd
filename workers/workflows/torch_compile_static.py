"""Hugging Face's compiled-generation recipe: a static KV cache, so every decode step has the same shapes, and the
decode forward compiled by generate() itself (CompileConfig, default mode reduce-overhead: CUDA graphs). Inductor's
caches and dynamo's precompile cache live in the env's cache folder, so the next process loads the compiled forward
instead of tracing transformers' model code again (most of a warm compile otherwise).

generate() compiles `self.__call__` (PreTrainedModel.get_compiled_call), whose saved guards name a closure variable
of transformers' wrapper that a later process cannot resolve. So the model hands generate() the same forward, compiled
with the same CompileConfig, as a module-level function that takes the model as an argument: the same graphs, with
guards that load, and a loaded graph never holds another job's model."""

import collections  # noqa: F401  (read by the compiled _forward: see there)
import functools
from contextlib import contextmanager
from typing import Iterator

from transformers import CompileConfig

from mlcbench.workers.decode.hf_generate import HFGenerateRunner
from mlcbench.workers.stacks.inductor_cache import (compile_for_warm_start, forget_installed_globals, job_shape,
                                                     warm_start_caches)
from mlcbench.schema import Applied
from mlcbench.schema.options import TorchCompileStaticOptions
from mlcbench.workers.interface import CausalLM, LLMRunner, Prepared, Workflow, WorkflowContext


def _forward(model, **inputs):
    # the compiled bytecode fills the ModelOutput it returns (an OrderedDict) through this module's global
    # `collections`; without one, dynamo installs the module under a name its precompile cache does not save
    # (NameError in the loading process; torch 2.13)
    return model(**inputs)


def install_compiled_call(model, config: CompileConfig) -> None:
    """generate() asks the model for its compiled call at each call; this one answers with _forward, compiled once."""
    forget_installed_globals(globals(), _IMPORTED)
    call = functools.partial(compile_for_warm_start(_forward, **config.to_dict()), model)
    model.get_compiled_call = lambda compile_config: call


class TorchCompileStatic(Workflow[TorchCompileStaticOptions]):
    @contextmanager
    def compiling(self, ctx: WorkflowContext[TorchCompileStaticOptions]) -> Iterator[tuple[str, ...]]:
        with warm_start_caches(ctx.cache_dir, ctx.device, precompile_shape=job_shape(ctx.job)) as caches:
            yield caches

    def prepare_llm(self, model: CausalLM, ctx: WorkflowContext[TorchCompileStaticOptions]) -> Prepared[LLMRunner]:
        mode = ctx.options.compile_mode
        config = CompileConfig(fullgraph=True, mode=mode)
        if ctx.device.type == "cpu":
            # generate() auto-compiles only on accelerators; this private switch lets the same recipe run on a CPU
            config._compile_all_devices = True
        install_compiled_call(model, config)
        return Prepared(HFGenerateRunner(model, cache_implementation="static", compile_config=config),
                        Applied(backend="inductor", compile_mode=mode, kv_cache="static", dynamic_shapes=False,
                                decode_loop="hf_generate"))


# this module's own names: any other global is one dynamo installed for a compiled function
_IMPORTED = frozenset(globals()) | {"_IMPORTED"}
