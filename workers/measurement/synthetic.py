"""A synthetic model through one workflow: compile cost, whole-call time and TFLOPS, the GPU time of one call without
the host's launch cost (measurement/device_time.py), the error against eager on each seeded input set (the timed calls
cycle through them, each compared with its set's checked call), and whether a call ran compiled code at all."""

from typing import Callable, ContextManager, Optional

import torch

from mlcbench.schema import WORKFLOWS, Correctness, Timing
from mlcbench.schema.results import Setting
from mlcbench.workers.measurement.core import KindFigures, ModelKind
from mlcbench.workers.measurement.correctness import (CALL_TO_CALL_NOISE, EAGER_DEVICES, INPUT_SETS, InputSetsChecked,
                                                      as_torch, compare_tensors, with_timed_calls)
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
        # the values of each input set; a call's set is written into self.inputs in place (a runner may have bound
        # those tensors: IO binding, CUDA graphs)
        self.input_sets = [tuple(tensor.clone() for tensor in self.inputs)] + [
            synthetic.input_set(self.info, ctx.job, ctx.dtype, ctx.device, index) for index in range(1, INPUT_SETS)]
        self.input_set = 0  # the set self.inputs holds

    def reference(self, set_aside: Callable[[], ContextManager[None]], notes: dict[str, Setting]) -> ReferenceState:
        return {"expected": self.model(*self.inputs),
                "expected_sets": torch.stack([self.model(*inputs) for inputs in self.input_sets[1:]])}

    def use_reference(self, state: ReferenceState) -> None:
        self.expected = state["expected"].to(self.ctx.device)
        self.expected_sets = list(state["expected_sets"].to(self.ctx.device))
        self.eager_ops = aten_ops(lambda: self.model(*self.inputs))
        # per timed call, its output's relative difference from its set's checked call's (None: another shape)
        self.timed_differences: list[Callable[[], Optional[float]]] = []

    def prepare(self, workflow: Workflow, ctx: WorkflowContext) -> Prepared[Callable[..., object]]:
        self.workflow_name = workflow.name
        return workflow.compile_module(self.model, self.inputs, ctx)

    def _use_input_set(self, index: int) -> None:
        for tensor, values in zip(self.inputs, self.input_sets[index]):
            tensor.copy_(values)
        self.input_set = index

    def first_call(self, prepared: Prepared[Callable[..., object]]) -> Callable[[], object]:
        return self.call(prepared)

    def check(self, output: object) -> Optional[Correctness]:
        if self.expected is None:
            return None
        # a copy: a workflow's CUDA graphs may write the next call's output into the same memory
        self.checked_outputs = [output.detach().clone() if isinstance(output, torch.Tensor) else output]
        return compare_tensors(output, self.expected, self.ctx.dtype)

    def check_input_sets(self, prepared: Prepared[Callable[..., object]]) -> InputSetsChecked:
        """One call of each other input set, written into the inputs in place, against eager's output for it; kept
        as what that set's timed calls must repeat. A workflow whose runner never reads its inputs again
        (inputs_moved_once) keeps one set."""
        info = WORKFLOWS.get(self.workflow_name)
        if info is not None and info.inputs_moved_once:
            return InputSetsChecked(1)
        failures = []
        for index, expected in enumerate(self.expected_sets, start=1):
            self._use_input_set(index)
            output = prepared.runner(*self.inputs)
            self.checked_outputs.append(output.detach().clone() if isinstance(output, torch.Tensor) else output)
            check = compare_tensors(output, expected, self.ctx.dtype)
            if not check.passed:
                failures.append(f"input set {index + 1}'s output is "
                                + (f"{check.rel_l2_error:.3g} from eager's (relative L2), tolerance {check.tolerance:.3g}"
                                   if check.rel_l2_error is not None else "not eager's shape or not finite"))
        self._use_input_set(0)
        return InputSetsChecked(len(self.checked_outputs), tuple(failures))

    def keep_timed(self, output: object) -> None:
        checked = self.checked_outputs[self.input_set]
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
        # the next timed call's inputs, written outside this call's timed interval
        self._use_input_set((self.input_set + 1) % len(self.checked_outputs))

    def check_timed(self, checked: Correctness) -> Correctness:
        differences = [difference() for difference in self.timed_differences]
        noise = CALL_TO_CALL_NOISE[self.ctx.dtype]
        failed = [index for index, difference in enumerate(differences)
                  if difference is None or not difference <= noise]  # another shape, NaN or beyond noise
        why = ""
        if failed:
            difference = differences[failed[0]]
            why = (f"timed call {failed[0] + 1} differs from its input set's checked call by "
                   f"{'its shape' if difference is None else f'{difference:.3g} (relative L2)'}; allowed "
                   f"{noise:.3g}, a rounding of {self.ctx.job.precision}")
        return with_timed_calls(checked, len(differences), len(failed), why)

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
        # eager's own ops in eager's order: the workflow ran the module as eager does, compiling nothing
        compiled = None if self.expected is None else aten_ops(self.call(prepared)) != self.eager_ops
        return KindFigures(process={"device_samples_ms": device_samples, "device_method": device_method},
                           metrics={"flops": flops, "tflops": flops / (latency.median_ms * 1e-3) / 1e12,
                                    "compiled_code_ran": compiled})


def aten_ops(call: Callable[[], object]) -> list[str]:
    """The PyTorch operators one call dispatches, in order (the profiler's CPU events): a compiled program's are not
    eager's (a dynamo graph runs its own kernels, a TorchScript graph its fused ops, ONNX Runtime and XLA none)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        call()
    return [event.name for event in profiler.events() if event.name.startswith("aten::")]
