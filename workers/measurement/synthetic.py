"""A synthetic model through one workflow: compile cost, whole-call time and TFLOPS, the GPU time of one call without
the host's launch cost (measurement/device_time.py), and the error against eager."""

from typing import Callable, ContextManager, Optional

import torch

from mlcbench.schema import Correctness, Timing
from mlcbench.schema.results import Setting
from mlcbench.workers.measurement.core import KindFigures, ModelKind
from mlcbench.workers.measurement.correctness import CALL_TO_CALL_NOISE, EAGER_DEVICES, as_torch, compare_tensors, with_timed_calls
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
        # per timed call, its output's relative difference from the checked call's (None: another shape)
        self.timed_differences: list[Callable[[], Optional[float]]] = []

    def prepare(self, workflow: Workflow, ctx: WorkflowContext) -> Prepared[Callable[..., object]]:
        return workflow.compile_module(self.model, self.inputs, ctx)

    def first_call(self, prepared: Prepared[Callable[..., object]]) -> Callable[[], object]:
        return self.call(prepared)

    def check(self, output: object) -> Optional[Correctness]:
        if self.expected is None:
            return None
        # a copy: a workflow's CUDA graphs may write the next call's output into the same memory
        self.checked_output = output.detach().clone() if isinstance(output, torch.Tensor) else output
        return compare_tensors(output, self.expected, self.ctx.dtype)

    def keep_timed(self, output: object) -> None:
        checked = self.checked_output
        if isinstance(output, torch.Tensor) and isinstance(checked, torch.Tensor) and output.device.type in EAGER_DEVICES \
                and output.shape == checked.shape:
            # the difference's norm, a scalar left on the device, computed now: the next call may write its output
            # into the same memory (CUDA graphs, ONNX Runtime's bound outputs)
            norm = torch.linalg.vector_norm(output - checked, dtype=torch.float32)
            self.timed_differences.append(lambda: norm.item() / max(torch.linalg.vector_norm(
                checked, dtype=torch.float64).item(), 1e-30))
        else:
            # a JAX or NumPy array (immutable), an XLA tensor (an op on it would run inside the next timed call) or
            # another shape (None): compared after the calls
            self.timed_differences.append(
                lambda: compare_tensors(output, as_torch(checked), self.ctx.dtype).rel_l2_error)

    def check_timed(self, checked: Correctness) -> Correctness:
        differences = [difference() for difference in self.timed_differences]
        noise = CALL_TO_CALL_NOISE[self.ctx.dtype]
        failed = [index for index, difference in enumerate(differences)
                  if difference is None or not difference <= noise]  # another shape, NaN or beyond noise
        why = ""
        if failed:
            difference = differences[failed[0]]
            why = (f"timed call {failed[0] + 1} differs from the checked call by "
                   f"{'its shape' if difference is None else f'{difference:.3g} (relative L2)'}; allowed "
                   f"{noise:.3g}, a rounding of {self.ctx.job.precision}")
        return with_timed_calls(checked, len(differences), len(failed), why)

    def call(self, prepared: Prepared[Callable[..., object]]) -> Callable[[], object]:
        runner, inputs = prepared.runner, self.inputs
        return lambda: runner(*inputs)

    def after_timed_calls(self, prepared: Prepared[Callable[..., object]], latency: Timing,
                          notes: dict[str, Setting]) -> KindFigures:
        job = self.ctx.job
        device_samples: list[float] = []
        device_method = None
        if self.cuda:
            device_samples, device_method = device_times(self.call(prepared), job.repeats, prepared.sync, notes)
        flops = synthetic.flops(self.info, job)
        return KindFigures(process={"device_samples_ms": device_samples, "device_method": device_method},
                           metrics={"flops": flops, "tflops": flops / (latency.median_ms * 1e-3) / 1e12})
