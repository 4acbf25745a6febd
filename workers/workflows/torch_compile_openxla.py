"""torch.compile(backend="openxla") on a torch_xla device (the openxla env: torch 2.5 + torch_xla 2.5, CUDA 12.4).

Module and inputs are moved to the XLA device once (the timed calls measure the computation, not transfers); the
output stays an XLA tensor, and ctx.sync flushes the pending graph and waits for the device.

LLMs are refused: generate() only auto-compiles on CUDA devices, and a hand-compiled static-cache forward on torch_xla
needs a per-step sync of the lazy host-side decode ops, which we cannot test without a GPU torch_xla build."""

import os

import torch

from mlcbench.workers.workflows.base import Unsupported, Workflow, require


def _pjrt_environment(device_type: str) -> dict:
    if device_type == "cuda":
        # PJRT preallocates most of the GPU otherwise: peak-memory figures would mean nothing
        return {"PJRT_DEVICE": "CUDA", "GPU_NUM_DEVICES": "1", "PJRT_ALLOCATOR_PREALLOCATE": "false"}
    return {"PJRT_DEVICE": "CPU"}


class TorchCompileOpenXLA(Workflow):
    name = "torch_compile_openxla"

    def compile_module(self, module, inputs, ctx):
        for key, value in _pjrt_environment(ctx.device.type).items():  # read by torch_xla when it loads
            ctx.settings[key] = os.environ.setdefault(key, value)
        torch_xla = require("torch_xla", "the openxla env's PyTorch/XLA")
        xm = require("torch_xla.core.xla_model")
        # torch_xla.device() / torch_xla.sync() are the current names; older releases only have the xm ones
        device = torch_xla.device() if hasattr(torch_xla, "device") else xm.xla_device()
        flush = getattr(torch_xla, "sync", None) or xm.mark_step

        def sync(_: object) -> None:
            flush()
            xm.wait_device_ops()

        module.to(device)
        on_device = tuple(tensor.to(device) for tensor in inputs)
        compiled = torch.compile(module, backend="openxla", dynamic=False)
        ctx.sync = sync
        ctx.apply(backend="openxla", dynamic_shapes=False)
        ctx.settings.update(xla_device=str(device), torch_xla=getattr(torch_xla, "__version__", "unknown"))
        return lambda *_: compiled(*on_device)

    def prepare_llm(self, model, ctx):
        raise Unsupported("torch_compile_openxla: LLM decoding on torch_xla (hand-compiled static-cache forward "
                          "with per-step syncs) is not implemented in this worker")
