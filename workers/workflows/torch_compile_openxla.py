"""torch.compile(backend="openxla") on a torch_xla device (the openxla env: torch 2.5 + torch_xla 2.5).

Synthetic models: module and inputs are moved to the XLA device once (the timed calls measure the computation, not
transfers); the output stays an XLA tensor, and the Prepared's sync flushes the pending graph and waits for the
device.

LLMs: the paper's recipe taken literally: model and prompt on the XLA device, the forward compiled with
backend="openxla", Hugging Face generate() with the default dynamic cache. The cache grows every step, so dynamo
compiles a graph per shape until its cache limit, after which torch_xla traces the steps lazily. The static variant
(torch_compile_openxla_static) keeps every decode step's shapes equal. XLA's own compilations (which dynamo's counters
do not see) are recorded as the xla_compiles settings. Tokens and logits come back to the prompt's device, where
eager's reference was made.

A GPU job needs torch_xla's CUDA PJRT plugin (torch_xla_cuda_plugin), which is published only on Google's storage:
without it the job is unsupported, not silently run by XLA on the CPU.
"""

import importlib.util
import os
from dataclasses import dataclass
from typing import Callable, Optional

import torch

from mlcbench.schema import Applied
from mlcbench.schema.options import NoOptions
from mlcbench.schema.results import Setting
from mlcbench.workers.interface import (CausalLM, Fragment, Generation, LLMRunner, Prepared, Unsupported, Workflow,
                                        WorkflowContext, require)
from mlcbench.workers.decode.hf_generate import HFGenerateRunner

CUDA_PLUGIN = "torch_xla_cuda_plugin"


def _pjrt_environment(device_type: str) -> dict:
    if device_type == "cuda":
        # PJRT preallocates most of the GPU otherwise: peak-memory figures would mean nothing
        return {"PJRT_DEVICE": "CUDA", "GPU_NUM_DEVICES": "1", "PJRT_ALLOCATOR_PREALLOCATE": "false"}
    return {"PJRT_DEVICE": "CPU"}


@dataclass(frozen=True)
class XLADevice:
    device: torch.device
    sync: Callable[[object], None]  # flushes the pending graph and waits for the device
    fragment: Fragment  # the backend, PJRT's environment and torch_xla's version


def xla_device(ctx: WorkflowContext[NoOptions]) -> XLADevice:
    """The XLA device for this job (PJRT set up for the job's device first), and how to wait for it."""
    if ctx.device.type == "cuda" and importlib.util.find_spec(CUDA_PLUGIN) is None:
        raise Unsupported(f"torch_xla on a GPU needs its CUDA PJRT plugin ({CUDA_PLUGIN}), which is not installed "
                          f"here: it is published only on Google's storage, not PyPI (a CPU build of torch_xla runs "
                          f"PJRT on the CPU only)")
    # read by torch_xla when it loads
    notes: dict[str, Setting] = {key: os.environ.setdefault(key, value)
                                 for key, value in _pjrt_environment(ctx.device.type).items()}
    torch_xla = require("torch_xla", "the openxla env's PyTorch/XLA")
    xm = require("torch_xla.core.xla_model")
    # torch_xla.device() / torch_xla.sync() are the current names; older releases only have the xm ones
    device = torch_xla.device() if hasattr(torch_xla, "device") else xm.xla_device()
    flush = getattr(torch_xla, "sync", None) or xm.mark_step

    def sync(_: object) -> None:
        flush()
        xm.wait_device_ops()

    notes.update(xla_device=str(device), torch_xla=getattr(torch_xla, "__version__", "unknown"))
    return XLADevice(device, sync, Fragment(Applied(backend="openxla"), notes))


def xla_compiles() -> int:
    """XLA compilations so far in this process (torch_xla's CompileTime metric; dynamo's counters do not see them)."""
    metrics = require("torch_xla.debug.metrics")
    data = metrics.metric_data("CompileTime")
    return int(data[0]) if data else 0


class XLAGenerateRunner:
    """An LLMRunner around generate() on the XLA device: the prompt goes there, tokens and logits come back. XLA's
    compilations so far are written into `notes` at each call (the workflow's Prepared.notes)."""

    def __init__(self, generate: HFGenerateRunner, device: torch.device, notes: dict[str, Setting],
                 compiles: Callable[[], int] = xla_compiles):
        self._generate = generate
        self._device = device
        self._notes = notes
        self._compiles = compiles

    def generate(self, input_ids: torch.Tensor, max_new_tokens: int, with_logits: bool = False,
                 on_token: Optional[Callable[[], None]] = None,
                 forced_tokens: Optional[torch.Tensor] = None) -> Generation:
        if forced_tokens is not None:
            forced_tokens = forced_tokens.to(self._device)
        out = self._generate.generate(input_ids.to(self._device), max_new_tokens, with_logits, on_token,
                                      forced_tokens)
        compiles = self._compiles()
        self._notes.setdefault("xla_compiles_first_call", compiles)
        self._notes["xla_compiles"] = compiles
        logits = None if out.step_logits is None else out.step_logits.to(input_ids.device)
        return Generation(tokens=out.tokens.to(input_ids.device), step_logits=logits)


class TorchCompileOpenXLA(Workflow[NoOptions]):
    # generate()'s KV cache: "dynamic" (the paper's recipe, Hugging Face's default) or "static"
    cache = "dynamic"

    def compile_module(self, module: torch.nn.Module, inputs: tuple[torch.Tensor, ...],
                       ctx: WorkflowContext[NoOptions]) -> Prepared[Callable[..., object]]:
        xla = xla_device(ctx)
        module.to(xla.device)
        on_device = tuple(tensor.to(xla.device) for tensor in inputs)
        compiled = torch.compile(module, backend="openxla", dynamic=False)
        return Prepared(lambda *_: compiled(*on_device), Applied(dynamic_shapes=False), xla.sync).fold(xla.fragment)

    def prepare_llm(self, model: CausalLM, ctx: WorkflowContext[NoOptions]) -> Prepared[LLMRunner]:
        xla = xla_device(ctx)
        model.to(xla.device)
        model.forward = torch.compile(model.forward, backend="openxla")
        # disable_compile: generate() must not compile the forward a second time (with inductor) on a GPU
        static = {"cache_implementation": "static"} if self.cache == "static" else {}
        notes: dict[str, Setting] = {}
        runner = XLAGenerateRunner(HFGenerateRunner(model, disable_compile=True, **static), xla.device, notes)
        decided = Fragment(Applied(kv_cache=self.cache, dynamic_shapes=self.cache == "dynamic",
                                   decode_loop="hf_generate"), {"compiled": "model.forward"})
        return Prepared(runner, sync=xla.sync, notes=notes).fold(xla.fragment, decided)

