"""Greedy decoding with the whole decode step compiled (gpt-fast style): forward, greedy token choice and position
update are one graph, replayed as one CUDA graph per token; the host only queues replays, it never waits inside
the loop. Prefill (any prompt length) is compiled on its own with dynamic shapes, and replayed as a CUDA graph per
prompt shape where asked (`prefill_graph`)."""

from typing import Callable, Optional

import torch

from mlcbench.workers.interface import Generation
from mlcbench.workers.decode.static_llama import StaticLlama
from mlcbench.workers.stacks.inductor_cache import compile_for_warm_start, forget_installed_globals

# gpt-fast's Inductor settings: tune each generated kernel's launch config, name kernels after what they compute
# (readable profiles), keep compiled graphs on disk (the default, stated: warm compiles depend on it). Passed per
# compiled function, so other jobs in this worker keep Inductor's defaults.
TUNING = {"coordinate_descent_tuning": True, "triton.unique_kernel_names": True, "fx_graph_cache": True}


def _greedy(logits: torch.Tensor, eos_ids: torch.Tensor) -> torch.Tensor:
    # generate()'s min_new_tokens forbids EOS until the last token: the same here, so tokens match eager's
    return logits.index_fill(-1, eos_ids, float("-inf")).argmax(dim=-1)


def prefill(model: StaticLlama, ids: torch.Tensor, eos_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    logits = model(ids, torch.arange(ids.shape[1], device=ids.device))
    return _greedy(logits, eos_ids), logits


def decode_step(model: StaticLlama, token: torch.Tensor, position: torch.Tensor,
                eos_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    logits = model(token[:, None], position)
    return _greedy(logits, eos_ids), position + 1, logits


def compile_options(mode: str, pdl: bool = False) -> dict[str, object]:
    """What torch.compile's `mode` turns on, plus gpt-fast's tuning (torch.compile takes a mode or options, not both),
    and with `pdl` programmatic dependent launch: each of Inductor's Triton kernels starts while the one before it
    finishes, and waits (griddepcontrol) only where it reads that kernel's output."""
    from torch._inductor import list_mode_options

    return {**list_mode_options(mode), **TUNING, **({"triton.enable_pdl": True} if pdl else {})}


def pdl_unavailable(device: torch.device) -> Optional[str]:
    """Why Inductor would generate no PDL for this device (it then drops it silently), or None where it will."""
    from torch._inductor import config

    if not hasattr(config.triton, "enable_pdl"):
        return f"torch {torch.__version__} has no PDL in Inductor (torch._inductor.config.triton.enable_pdl)"
    if device.type != "cuda":
        return f"PDL (programmatic dependent launch) is a CUDA feature; this job runs on {device.type}"
    major, minor = torch.cuda.get_device_capability(device)
    if major < 9:
        return f"PDL needs compute capability 9.0 or later (Hopper); this GPU has {major}.{minor}"
    return None


class CompiledStepRunner:
    def __init__(self, model: StaticLlama, eos_token_ids: list[int], step_mode: str, pdl: bool = False,
                 prefill_graph: bool = False):
        """pdl: in the decode step only, as vLLM does: a PDL launch costs the host a little more, which only the
        step's CUDA graph replay takes off it. prefill_graph: the prefill as a CUDA graph too (mode reduce-overhead,
        one graph per prompt shape): at batch 1 the host launching its few hundred kernels one by one takes longer
        than the GPU runs them."""
        forget_installed_globals(globals(), _IMPORTED)
        self.model = model
        self.eos_ids = torch.tensor(eos_token_ids, dtype=torch.long, device=model.embed.device)
        torch._dynamo.mark_static_address(self.eos_ids)  # a CUDA graph reads it in place, no copy per replay
        prefill_mode = "reduce-overhead" if prefill_graph else "default"
        self.prefill = compile_for_warm_start(prefill, fullgraph=True, dynamic=True,
                                              options=compile_options(prefill_mode))
        self.step = compile_for_warm_start(decode_step, fullgraph=True, options=compile_options(step_mode, pdl))

    @torch.no_grad()
    def generate(self, input_ids: torch.Tensor, max_new_tokens: int, with_logits: bool = False,
                 on_token: Optional[Callable[[], None]] = None,
                 forced_tokens: Optional[torch.Tensor] = None) -> Generation:
        batch, prompt_len = input_ids.shape
        forced_steps = None if forced_tokens is None else forced_tokens.to(input_ids.device, torch.long).t()
        if batch != self.model.batch or prompt_len + max_new_tokens > self.model.length:
            # a shorter call (the prefill timed on its own) keeps the cache of the timed calls: the same graphs run
            self.model.allocate_cache(batch, prompt_len + max_new_tokens)
        tokens = torch.empty(batch, max_new_tokens, dtype=torch.long, device=input_ids.device)
        # the prefill's graph (where it replays one) starts a new generation of CUDA-graph outputs; its token is kept
        # as a copy, since the first step's replay reuses that memory
        torch.compiler.cudagraph_mark_step_begin()
        token, logits = self.prefill(self.model, input_ids, self.eos_ids)
        token = token.clone()
        position = torch.full((1,), prompt_len, dtype=torch.long, device=input_ids.device)
        step_logits = []
        for index in range(max_new_tokens):
            if index:
                torch.compiler.cudagraph_mark_step_begin()
                token, position, logits = self.step(self.model, token, position, self.eos_ids)
                # the next replay overwrites the CUDA graph's output buffers: what it reads, and what is kept, are
                # copies (as gpt-fast clones its next token)
                token, position = token.clone(), position.clone()
            tokens[:, index] = token
            if forced_steps is not None:
                # a tensor like the step's own token (shape, strides, dtype, device): the step's guards hold, the same
                # compiled step (and CUDA graph) runs
                token = forced_steps[index].clone(memory_format=torch.contiguous_format)
            if with_logits:
                step_logits.append(logits.to(torch.float32, copy=True))
            if on_token is not None:
                on_token()
        return Generation(tokens=tokens, step_logits=torch.stack(step_logits, dim=1) if with_logits else None)


# this module's own names: any other global is one dynamo installed for a compiled function
_IMPORTED = frozenset(globals()) | {"_IMPORTED"}
