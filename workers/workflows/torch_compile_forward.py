"""LLMs: the forward itself compiled (inductor) and driven by generate() with the default dynamic cache. The KV cache
grows by one position per step, so dynamo recompiles with dynamic shapes; no CUDA graphs. What `torch.compile(model)`
is usually meant to do, and does not do, for generate().

Inductor's caches and dynamo's precompile cache live in the env's cache folder: without the latter a warm process
found every graph in Inductor's caches and still traced the model in dynamo three times (prefill, first decode step,
the recompile with dynamic shapes), ≈ 12 % of a cold compile on the CPU and 20-30 s on an H200. As in
torch_compile_static, the compiled function takes the model as an argument, so its saved guards load in a later
process and a loaded graph never holds another job's model."""

import collections  # noqa: F401  (read by the compiled _forward: see torch_compile_static)
import functools
from contextlib import contextmanager
from typing import Iterator


from mlcbench.schema import Applied
from mlcbench.schema.options import TorchCompileOptions
from mlcbench.workers.decode.hf_generate import HFGenerateRunner
from mlcbench.workers.interface import CausalLM, LLMRunner, Prepared, Workflow, WorkflowContext
from mlcbench.workers.stacks.inductor_cache import (compile_for_warm_start, forget_installed_globals, job_shape,
                                                     warm_start_caches)


def _forward(model, *args, **kwargs):
    return type(model).forward(model, *args, **kwargs)


class TorchCompileForward(Workflow[TorchCompileOptions]):
    @contextmanager
    def compiling(self, ctx: WorkflowContext[TorchCompileOptions]) -> Iterator[tuple[str, ...]]:
        with warm_start_caches(ctx.cache_dir, ctx.device, precompile_shape=job_shape(ctx.job)) as caches:
            yield caches

    def prepare_llm(self, model: CausalLM, ctx: WorkflowContext[TorchCompileOptions]) -> Prepared[LLMRunner]:
        mode = ctx.options.compile_mode
        forget_installed_globals(globals(), _IMPORTED)
        model.forward = functools.partial(compile_for_warm_start(_forward, mode=mode), model)
        return Prepared(HFGenerateRunner(model, disable_compile=True),
                        Applied(backend="inductor", compile_mode=mode, kv_cache="dynamic", dynamic_shapes=True,
                                decode_loop="hf_generate"),
                        notes={"compiled": "model.forward"})


# this module's own names: any other global is one dynamo installed for a compiled function
_IMPORTED = frozenset(globals()) | {"_IMPORTED"}
