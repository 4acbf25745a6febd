"""Test-only workflows that break the worker on purpose, to exercise crash and timeout handling.

Loaded only when the worker runs with MLCBENCH_TEST_FAULTS=1; the CLI's planner never offers them."""

import ctypes
import os
import signal
import time

from mlcbench.schema.options import NoOptions
from mlcbench.workers.interface import Workflow


class KillSelf(Workflow[NoOptions]):
    def compile_module(self, module, inputs, ctx):
        os.kill(os.getpid(), signal.SIGKILL)


class Segfault(Workflow[NoOptions]):
    def compile_module(self, module, inputs, ctx):
        ctypes.string_at(0)


class OutOfMemory(Workflow[NoOptions]):
    """What PyTorch's CUDA caching allocator raises when a model does not fit."""

    def compile_module(self, module, inputs, ctx):
        import torch

        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 80.00 GiB")


class Hang(Workflow[NoOptions]):
    def compile_module(self, module, inputs, ctx):
        while True:
            time.sleep(1)


# the names jobs give them (schema/catalog.py's FAULT_WORKFLOWS)
FAULTS: dict[str, type[Workflow[NoOptions]]] = {"fault-kill": KillSelf, "fault-segfault": Segfault,
                                                "fault-oom": OutOfMemory, "fault-hang": Hang}
