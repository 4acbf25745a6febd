"""PyTorch modules on JAX/XLA through torchax: the module's weights and inputs moved to the "jax" device, its
forward traced and jitted by JAX (torchax.compile). Outputs wrap jax.Arrays, computed asynchronously: the Prepared's
sync blocks on them before a timer stops.

LLMs: our greedy loop without a KV cache, run on torchax tensors end to end; the forward returns only the last
position's logits and is jitted once per sequence length (all lengths compile during the first generate call), each
length's trace exported once and loaded by later processes (stacks/jax_traces.py)."""

import os
import time
from contextlib import contextmanager
from typing import Callable, Iterator, Optional

import torch

from mlcbench.schema import Applied
from mlcbench.schema.options import NoOptions
from mlcbench.schema.results import Setting
from mlcbench.workers.interface import (CausalLM, Generation, LLMRunner, Prepared, Unsupported, Workflow, WorkflowContext,
                                        require)
from mlcbench.workers.decode.greedy import GreedyRunner
from mlcbench.workers.stacks.jax_traces import TRACES, ExportedForward, JaxCompileCounts, trace_key, trace_parts

PREALLOCATE = "XLA_PYTHON_CLIENT_PREALLOCATE"
JAX_CACHE = "jax"  # the persistent compilation cache's folder in the workflow's cache folder
_tolerated_overloads: list = []  # filled once, when torchax first loads in this process


@contextmanager
def _named_tensor_overloads_tolerated(seen: list) -> Iterator[None]:
    """torchax 0.0.13 lists aten overloads of named-tensor variants (prod.dim_Dimname, std.correction_names ...) in
    its op tables; torch 2.13 dropped them, so the lookup fails at import. While torchax loads, such a name resolves
    to a placeholder key that no dispatch can ever hit."""
    packet = torch._ops.OpOverloadPacket
    original = packet.__getattr__

    def lookup(self, key):
        try:
            return original(self, key)
        except AttributeError:
            if "name" not in key.lower():
                raise
            seen.append(f"{self._qualified_op_name}.{key}")
            return ("missing overload", self._qualified_op_name, key)

    packet.__getattr__ = lookup  # type: ignore[method-assign]
    try:
        yield
    finally:
        packet.__getattr__ = original  # type: ignore[method-assign]


def _load(ctx: WorkflowContext[NoOptions]):
    """torchax, its environment and jax, and the notes that record them."""
    # JAX takes 75 % of GPU memory at start-up unless told not to: peak-memory figures would mean nothing
    notes: dict[str, Setting] = {PREALLOCATE: os.environ.setdefault(PREALLOCATE, "false")}
    with _named_tensor_overloads_tolerated(_tolerated_overloads):
        torchax = require("torchax", "PyTorch on JAX")
        env = torchax.default_env()
    # Tensors reach the "jax" device through DLPack, CUDA memory handed over as it is: through the host (torchax's
    # default: a CUDA tensor counts as already on the jax device, a CPU one is copied through numpy, bf16 through
    # float32) moving Llama-2-7B's weights cost 15-22 s of every process (H200, 2026-11-29), a warm one's most.
    env.config.treat_cuda_as_jax_device = False
    env.config.use_dlpack_for_data_conversion = True
    import jax

    backend = jax.default_backend()
    if ctx.device.type == "cuda" and backend != "gpu":
        raise Unsupported(f"torchax: jax {jax.__version__} has no GPU backend here (default backend: {backend})")
    notes.update(torchax=torchax.__version__, jax=jax.__version__, jax_backend=backend)
    if _tolerated_overloads:
        notes["torchax_compat"] = (f"{len(_tolerated_overloads)} named-tensor overloads absent from torch "
                                   f"{torch.__version__} ignored")
    return torchax, env, jax, notes


def _to_jax(module: torch.nn.Module) -> None:
    """The module's weights and buffers onto the "jax" device, inside torchax's env. DLPack refuses a tensor that
    requires grad (torchax then copies it through numpy, silently): nothing here trains."""
    module.requires_grad_(False)
    module.to("jax")


class _TorchaxGreedy:
    """The greedy loop on torchax tensors; tokens and logits come back as torch tensors on the CPU."""

    def __init__(self, env, forward: Callable, eos_token_id: Optional[int], block: Callable):
        self.env = env
        self.greedy = GreedyRunner(forward, eos_token_id=eos_token_id, sync=lambda ids: block(ids.jax()))  # type: ignore[attr-defined]

    def generate(self, input_ids, max_new_tokens, with_logits=False, on_token=None, forced_tokens=None):
        with self.env:
            if forced_tokens is not None:
                forced_tokens = forced_tokens.to("jax", input_ids.dtype)
            out = self.greedy.generate(input_ids.to("jax"), max_new_tokens, with_logits, on_token, forced_tokens)
            # jax keeps 32-bit integers unless x64 is enabled
            tokens = out.tokens.to("cpu").to(torch.long)
            logits = out.step_logits.to("cpu") if with_logits else None
        return Generation(tokens=tokens, step_logits=logits)


class _LastLogits(torch.nn.Module):
    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, use_cache=False).logits[:, -1:, :]


class Torchax(Workflow[NoOptions]):
    def __init__(self) -> None:
        self.counts = JaxCompileCounts()

    @contextmanager
    def compiling(self, ctx: WorkflowContext[NoOptions]) -> Iterator[tuple[str, ...]]:
        """JAX's persistent compilation cache in the workflow's cache folder: a later process loads the XLA programs
        an earlier one compiled (an LLM's greedy loop without a KV cache compiles one per sequence length, minutes
        in all) instead of compiling them again; and what it found there, counted."""
        jax = require("jax", "torchax runs on JAX")
        jax.config.update("jax_compilation_cache_dir", str(ctx.cache_dir / JAX_CACHE))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)  # every program, however quick
        self.counts = JaxCompileCounts()
        with self.counts.listening():
            yield ("jax_compilation_cache",)

    def compile_module(self, module: torch.nn.Module, inputs: tuple[torch.Tensor, ...],
                       ctx: WorkflowContext[NoOptions]) -> Prepared[Callable[..., object]]:
        torchax, env, jax, notes = _load(ctx)
        with env:
            _to_jax(module)
            compiled = torchax.compile(module)
            # moved once, like IO binding: the timed calls measure the computation, not host transfers
            on_device = tuple(tensor.to("jax") for tensor in inputs)

        def run(*_: torch.Tensor):
            with env:
                return compiled(*on_device).jax()  # a jax.Array: torch.as_tensor converts it for the check

        return Prepared(run, Applied(backend="torchax (jax.jit)", dynamic_shapes=False), jax.block_until_ready,
                        notes, cache_counter=self.counts)

    def prepare_llm(self, model: CausalLM, ctx: WorkflowContext[NoOptions]) -> Prepared[LLMRunner]:
        torchax, env, jax, notes = _load(ctx)
        with env:
            begin = time.perf_counter()
            _to_jax(model)
            notes["weights_to_jax_s"] = round(time.perf_counter() - begin, 4)
            module = _LastLogits(model)
            key = trace_key(trace_parts(module, env, jax.default_backend(),
                                        ctx.options.model_dump_json(exclude_defaults=True)))
            forward = ExportedForward(module, ctx.cache_dir / TRACES / key, self.counts, lengths=ctx.job.output_len,
                                      phases=notes)
        return Prepared(_TorchaxGreedy(env, forward, model.config.eos_token_id, jax.block_until_ready),
                        Applied(backend="torchax (jax.jit per sequence length)", decode_loop="greedy_no_kv_cache",
                                kv_cache="none"),
                        notes=notes, cache_counter=self.counts)
