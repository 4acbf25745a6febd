"""TorchScript, the format libtorch and Triton Inference Server's PyTorch backend load: torch.jit.trace, frozen
(weights and attributes folded into the graph as constants), optimize_for_inference, saved to the env cache and
loaded back as a deployment would load it. Compile cost is the trace, the graph passes and the save and load; the
profiling executor specialises the graph in its first calls, which the warm-up absorbs.

torch deprecates torch.jit in favour of torch.compile and torch.export, and warns on every call: the warnings are
silenced here, the fact is the workflow's description in the catalog."""

import warnings
from typing import Callable

import torch

from mlcbench.schema import Applied
from mlcbench.schema.options import NoOptions
from mlcbench.workers.interface import Prepared, Workflow, WorkflowContext


class TorchScript(Workflow[NoOptions]):
    def compile_module(self, module: torch.nn.Module, inputs: tuple[torch.Tensor, ...],
                       ctx: WorkflowContext[NoOptions]) -> Prepared[Callable[..., object]]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            traced = torch.jit.trace(module.eval(), inputs)
            optimized = torch.jit.optimize_for_inference(torch.jit.freeze(traced))
            archive = ctx.cache_dir / f"{ctx.job.job_id}.pt"  # the cache folder is this workflow's
            torch.jit.save(optimized, str(archive))
            loaded = torch.jit.load(str(archive), map_location=ctx.device)
        return Prepared(loaded, Applied(backend="torchscript", dynamic_shapes=False),
                        notes={"archive": str(archive), "passes": "torch.jit.trace, freeze, optimize_for_inference"})
