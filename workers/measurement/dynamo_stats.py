"""Graph breaks and recompiles of everything torch.compile does inside a block, from dynamo's own counters/logs."""

import logging
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator, Literal, Mapping, Optional

from mlcbench.schema import CacheCounts


class _RecompileCounter(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("Recompiling function"):
            self.count += 1


def dynamo_imported() -> bool:
    """Whether this process has imported dynamo: a workflow that compiles nothing never does, and importing it only to
    read its counters put a large import into every such process before its first timed call."""
    return "torch._dynamo" in sys.modules


def compiled_graphs() -> int:
    """Graphs dynamo has compiled so far (a counter read: cheap enough around timed calls)."""
    if not dynamo_imported():
        return 0
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"]


def compile_cache_state(inductor: Mapping[str, int], aot_autograd: Mapping[str, int],
                        dynamo_cache: Mapping[str, int]) -> Optional[Literal["cold", "warm"]]:
    """"warm" when every graph came from an on-disk cache, "cold" when one was compiled from scratch, None when
    nothing was compiled. Judged by the FX graph cache (Inductor's own work: code generation, kernel compilation,
    tuning), by the AOTAutograd cache where the FX graph cache was not consulted, and by dynamo's precompile cache
    (whose hits skip both)."""
    fx_hits, fx_misses = inductor.get("fxgraph_cache_hit", 0), inductor.get("fxgraph_cache_miss", 0)
    if fx_misses or (not fx_hits and aot_autograd.get("autograd_cache_miss", 0)):
        return "cold"
    if fx_hits or aot_autograd.get("autograd_cache_hit", 0) or dynamo_cache.get("dynamo_cache_hit", 0):
        return "warm"
    return None


# where a compile's time goes, as dynamo times it: tracing the bytecode, then the backend (AOTAutograd and Inductor,
# cache loads included); the rest of a compile_s is the first call's own run and CUDA graph recording
COMPILE_PHASES = {"bytecode_tracing": "dynamo_trace_s", "OutputGraph.call_user_compiler": "backend_s"}


def _phase_seconds() -> dict[str, float]:
    from torch._dynamo.utils import compile_times

    names, values = compile_times(repr="csv", aggregate=True)
    return {name: float(str(value)) for name, value in zip(names, values) if name in COMPILE_PHASES}


@dataclass
class CompileStats:
    """What dynamo compiled inside a dynamo_stats block (all zero until the block ends)."""

    # graphs compiled, or loaded whole from the precompile cache (counted once per function)
    graphs: int = 0
    graph_breaks: int = 0
    recompiles: int = 0
    # CUDA graphs that Inductor was asked for and left out (mutated inputs, CPU tensors ...): a silent slow path
    cudagraph_skips: int = 0
    # seconds per COMPILE_PHASES name, for the phases dynamo timed inside the block
    phases: dict[str, float] = field(default_factory=dict)
    compile_cache: Optional[Literal["cold", "warm"]] = None
    cache_counts: Optional[CacheCounts] = None


# CacheCounts' fields, each from one of dynamo's counters: (group, name)
CACHE_COUNTERS = {
    "fx_graph_hits": ("inductor", "fxgraph_cache_hit"), "fx_graph_misses": ("inductor", "fxgraph_cache_miss"),
    "fx_graph_bypasses": ("inductor", "fxgraph_cache_bypass"),
    "aot_autograd_hits": ("aot_autograd", "autograd_cache_hit"),
    "aot_autograd_misses": ("aot_autograd", "autograd_cache_miss"),
    "aot_autograd_bypasses": ("aot_autograd", "autograd_cache_bypass"),
    "dynamo_precompile_hits": ("dynamo_cache", "dynamo_cache_hit"),
    "dynamo_precompile_misses": ("dynamo_cache", "dynamo_cache_miss"),
}


@contextmanager
def dynamo_stats() -> Iterator[CompileStats]:
    """Counts of what compiles inside the block. Recompile logging slows eager Python by ~10 %, so keep timed calls
    out of this block and check compiled_graphs() around them instead."""
    import torch

    phases_before: dict[str, float] = {}
    if dynamo_imported():
        from torch._dynamo.utils import counters

        counters.clear()
        phases_before = _phase_seconds()
    stats = CompileStats()
    handler = _RecompileCounter()
    logger = logging.getLogger("torch._dynamo")
    torch._logging.set_logs(recompiles=True)
    logger.addHandler(handler)
    try:
        yield stats
    finally:
        logger.removeHandler(handler)
        torch._logging.set_logs()
        if dynamo_imported():  # else nothing was compiled: the stats stay zero
            _count(stats, handler.count, phases_before)


def _count(stats: "CompileStats", recompiles: int, phases_before: dict[str, float]) -> None:
    from torch._dynamo.utils import counters

    stats.graph_breaks = sum(counters["graph_break"].values())
    stats.recompiles = recompiles
    # a precompile cache hit loads a compiled function's graphs without tracing them
    stats.graphs = counters["stats"]["unique_graphs"] + counters["dynamo_cache"]["dynamo_cache_hit"]
    stats.compile_cache = compile_cache_state(counters["inductor"], counters["aot_autograd"], counters["dynamo_cache"])
    stats.cudagraph_skips = counters["inductor"]["cudagraph_skips"]
    if stats.graphs:
        stats.cache_counts = CacheCounts(**{field: counters[group][name]
                                            for field, (group, name) in CACHE_COUNTERS.items()})
    stats.phases = {COMPILE_PHASES[name]: round(seconds - phases_before.get(name, 0.0), 3)
                    for name, seconds in _phase_seconds().items()}
