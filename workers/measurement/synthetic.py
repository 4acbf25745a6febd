"""A synthetic model through one workflow: compile cost, whole-call time and TFLOPS, the GPU time of one call without
the host's launch cost (measurement/device_time.py), and the error against eager."""

from typing import Callable, ContextManager, Optional

import torch

from mlcbench.schema import Correctness, Timing
from mlcbench.schema.results import Setting
from mlcbench.workers.measurement.core import KindFigures, ModelKind
from mlcbench.workers.measurement.correctness import compare_tensors
from mlcbench.workers.measurement.device_time import device_times
from mlcbench.workers.measurement.references import ReferenceState
from mlcbench.workers.models import synthetic
from mlcbench.workers.interface import Prepared, Workflow, WorkflowContext


class Synthetic(ModelKind[Callable[..., object]]):
    memory_counts_build = False
    applied_defaults = {"accumulation": "fp32"}  # PyTorch's own matmuls accumulate in fp32

    expected: Optional[torch.Tensor] = None

    def build(self) -> None:
        ctx = self.ctx
        self.model, self.inputs = synthetic.build(self.info, ctx.job, ctx.dtype, ctx.device)

    def reference(self, set_aside: Callable[[], ContextManager[None]], notes: dict[str, Setting]) -> ReferenceState:
        return {"expected": self.model(*self.inputs)}

    def use_reference(self, state: ReferenceState) -> None:
        self.expected = state["expected"].to(self.ctx.device)

    def prepare(self, workflow: Workflow, ctx: WorkflowContext) -> Prepared[Callable[..., object]]:
        return workflow.compile_module(self.model, self.inputs, ctx)

    def first_call(self, prepared: Prepared[Callable[..., object]]) -> Callable[[], object]:
        return self.call(prepared)

    def check(self, output: object) -> Optional[Correctness]:
        return None if self.expected is None else compare_tensors(output, self.expected, self.ctx.dtype)

    def call(self, prepared: Prepared[Callable[..., object]]) -> Callable[[], object]:
        runner, inputs = prepared.runner, self.inputs
        return lambda: runner(*inputs)

    def after_timed_calls(self, prepared: Prepared[Callable[..., object]], latency: Timing,
                          notes: dict[str, Setting]) -> KindFigures:
        job = self.ctx.job
        device_samples, device_method = [], None
        if self.cuda:
            device_samples, device_method = device_times(self.call(prepared), job.repeats, prepared.sync, notes)
        flops = synthetic.flops(self.info, job)
        return KindFigures(process={"device_samples_ms": device_samples, "device_method": device_method},
                           metrics={"flops": flops, "tflops": flops / (latency.median_ms * 1e-3) / 1e12})
