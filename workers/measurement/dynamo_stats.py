"""Graph breaks and recompiles of everything torch.compile does inside a block, from dynamo's own counters/logs."""

import logging
from contextlib import contextmanager
from typing import Iterator


class _RecompileCounter(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("Recompiling function"):
            self.count += 1


def compiled_graphs() -> int:
    """Graphs dynamo has compiled so far (a counter read: cheap enough around timed calls)."""
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"]


@contextmanager
def dynamo_stats() -> Iterator[dict[str, int]]:
    """Counts of what compiles inside the block. Recompile logging slows eager Python by ~10 %, so keep timed calls
    out of this block and check compiled_graphs() around them instead."""
    import torch
    from torch._dynamo.utils import counters

    counters.clear()
    stats: dict[str, int] = {}
    handler = _RecompileCounter()
    logger = logging.getLogger("torch._dynamo")
    torch._logging.set_logs(recompiles=True)
    logger.addHandler(handler)
    try:
        yield stats
    finally:
        logger.removeHandler(handler)
        torch._logging.set_logs()
        stats["graph_breaks"] = sum(counters["graph_break"].values())
        stats["recompiles"] = handler.count
        stats["graphs"] = counters["stats"]["unique_graphs"]
