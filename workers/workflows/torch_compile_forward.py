"""LLMs: the forward itself compiled (inductor) and driven by generate() with the default dynamic cache. The KV cache
grows by one position per step, so dynamo recompiles with dynamic shapes; no CUDA graphs. What `torch.compile(model)`
is usually meant to do, and does not do, for generate()."""

import torch

from mlcbench.schema import Applied
from mlcbench.workers.interface import Prepared, Workflow
from mlcbench.workers.decode.hf_generate import HFGenerateRunner


class TorchCompileForward(Workflow):
    def prepare_llm(self, model, ctx):
        mode = ctx.options.compile_mode or "default"
        model.forward = torch.compile(model.forward, mode=mode)
        return Prepared(HFGenerateRunner(model, disable_compile=True),
                        Applied(backend="inductor", compile_mode=mode, kv_cache="dynamic", dynamic_shapes=True,
                                decode_loop="hf_generate"),
                        notes={"compiled": "model.forward"})
