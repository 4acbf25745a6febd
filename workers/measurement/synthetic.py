"""A synthetic model through one workflow: compile cost, whole-call time and TFLOPS, the GPU time of one call without
the host's launch cost (measurement/device_time.py), and the error against eager, anchored as an LLM's is: per batch
row, within GOLD_MULTIPLIER times eager's own error against the model computed in fp32 (a half-precision job), on each
seeded input set; the timed calls cycle through the sets, each one's every element within a rounding of its set's
checked call's; and whether a call ran compiled code at all."""

from typing import Callable, ContextManager, Optional, cast

import torch

from mlcbench.schema import WORKFLOWS, Correctness, Timing
from mlcbench.schema.results import Setting
from mlcbench.workers.measurement.core import KindFigures, ModelKind
from mlcbench.workers.measurement.correctness import (CALL_TO_CALL_NOISE, EAGER_DEVICES, GOLD_MULTIPLIER, INPUT_SETS, in_fp32,
                                                       TOLERANCE, InputSetsChecked, as_torch, compare_tensors,
                                                       with_timed_calls)
from mlcbench.workers.measurement.device_time import device_times
from mlcbench.workers.measurement.references import ReferenceState
from mlcbench.workers.models import synthetic
from mlcbench.workers.interface import Prepared, Workflow, WorkflowContext

# A half-precision row's tolerance is never below one rounding of its dtype (RMS relative error of rounding a row):
# eager's own error against fp32 was 0.0017-0.005 per row in bf16 (the CPU's synthetic models, b1 and b4), leaky-ReLU
# for ReLU 0.010-0.023
ROW_ROUNDING = {torch.float16: 2.0 ** -12, torch.bfloat16: 2.0 ** -9}


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
        """Eager's output and (half precision) its fp32 output on the first input set, and stacked on the others."""
        expected = [self.model(*inputs) for inputs in self.input_sets]
        with set_aside():
            gold = [_fp32_output(self.model, inputs, self.ctx, notes) for inputs in self.input_sets]
        return {"expected": expected[0], "gold": gold[0], "expected_sets": torch.stack(expected[1:]),
                "gold_sets": None if gold[0] is None else torch.stack(cast(list[torch.Tensor], gold[1:]))}

    def use_reference(self, state: ReferenceState) -> None:
        self.expected = state["expected"].to(self.ctx.device)
        self.gold = state["gold"]  # on the CPU, where _fp32_output leaves it
        self.expected_sets = list(state["expected_sets"].to(self.ctx.device))
        self.gold_sets = [None] * len(self.expected_sets) if state["gold_sets"] is None else list(state["gold_sets"])
        self.eager_ops = aten_ops(lambda: self.model(*self.inputs))
        # per timed call, beyond_call_noise of its output against its set's checked call's (None: another shape)
        self.timed_excess: list[Callable[[], Optional[float]]] = []

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
        return compare_rows(output, self.expected, self.gold, self.ctx.dtype)

    def check_input_sets(self, prepared: Prepared[Callable[..., object]]) -> InputSetsChecked:
        """One call of each other input set, written into the inputs in place, against eager's output for it (per
        row, as the first call); kept as what that set's timed calls must repeat. A workflow whose runner never reads
        its inputs again (inputs_moved_once) keeps one set."""
        info = WORKFLOWS.get(self.workflow_name)
        if info is not None and info.inputs_moved_once:
            return InputSetsChecked(1)
        failures = []
        for index, (expected, gold) in enumerate(zip(self.expected_sets, self.gold_sets), start=1):
            self._use_input_set(index)
            output = prepared.runner(*self.inputs)
            self.checked_outputs.append(output.detach().clone() if isinstance(output, torch.Tensor) else output)
            check = compare_rows(output, expected, gold, self.ctx.dtype)
            if not check.passed:
                failures.append(f"input set {index + 1}'s output is "
                                + (f"{check.rel_l2_error:.3g} from eager's in row {check.worst_row} (relative L2), "
                                   f"tolerance {check.tolerance:.3g}" if check.rel_l2_error is not None
                                   else "not eager's shape or not finite"))
        self._use_input_set(0)
        return InputSetsChecked(len(self.checked_outputs), tuple(failures))

    def keep_timed(self, output: object) -> None:
        checked = self.checked_outputs[self.input_set]
        if isinstance(output, torch.Tensor) and isinstance(checked, torch.Tensor) and output.device.type in EAGER_DEVICES \
                and output.shape == checked.shape:
            # computed now, a scalar left on the device: the next call may write its output into the same memory (CUDA
            # graphs, ONNX Runtime's bound outputs)
            excess = beyond_call_noise(output, checked, self.ctx.dtype)
            self.timed_excess.append(lambda: excess.item())
        else:
            # a JAX or NumPy array (immutable), an XLA tensor (an op on it would run inside the next timed call) or
            # another shape (None): compared after the calls
            self.timed_excess.append(lambda: self._excess_on_the_host(output, checked))
        # the next timed call's inputs, written outside this call's timed interval
        self._use_input_set((self.input_set + 1) % len(self.checked_outputs))

    def _excess_on_the_host(self, output: object, checked: object) -> Optional[float]:
        output, checked = as_torch(output).cpu(), as_torch(checked).cpu()
        return None if output.shape != checked.shape else beyond_call_noise(output, checked, self.ctx.dtype).item()

    def check_timed(self, checked: Correctness) -> Correctness:
        excesses = [excess() for excess in self.timed_excess]
        failed = [index for index, excess in enumerate(excesses)
                  if excess is None or not excess <= 1]  # another shape, NaN or beyond noise
        why = ""
        if failed:
            excess = excesses[failed[0]]
            why = (f"timed call {failed[0] + 1} differs from its input set's checked call "
                   f"{'in its shape' if excess is None else f'by {excess:.3g} x the allowance at its worst element'}; "
                   f"allowed per element: {CALL_TO_CALL_NOISE[self.ctx.dtype]:.3g} (a rounding of "
                   f"{self.ctx.job.precision}) x the larger of the element and its row's RMS")
        return with_timed_calls(checked, len(excesses), len(failed), why)

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


def _fp32_output(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...], ctx: WorkflowContext,
                 notes: dict[str, Setting]) -> Optional[torch.Tensor]:
    """Eager's output with the model's weights and inputs in fp32: how far eager in half precision is from the same
    model computed exactly enough (None in fp32, or where the fp32 weights do not fit: the check then keeps its fixed
    tolerance, and says so in `notes`). The parameters go back to the job's dtype exactly (half -> fp32 -> half)."""
    if ctx.dtype == torch.float32:
        return None
    return in_fp32(model, ctx.dtype, notes, lambda: model(*(tensor.float() for tensor in inputs)))


def compare_rows(output: object, expected: torch.Tensor, gold: Optional[torch.Tensor], dtype: torch.dtype) -> Correctness:
    """A synthetic output against eager's, batch row by batch row (the worst row decides: one wrong row is not diluted
    by the others): each row's relative L2 error within its tolerance, GOLD_MULTIPLIER times eager's own error against
    `gold` (eager's output in fp32) in that row, never below ROW_ROUNDING; without `gold` (an fp32 job, or fp32 weights
    that did not fit) the precision's TOLERANCE."""
    whole = compare_tensors(output, expected, dtype)
    if whole.rel_l2_error is None:  # another shape, or values that are not finite: nothing to compare per row
        return whole
    out = as_torch(output).detach().to("cpu", torch.float64).flatten(1)
    ref = expected.detach().to("cpu", torch.float64).flatten(1)
    row_error = (out - ref).norm(dim=1) / ref.norm(dim=1).clamp_min(1e-300)
    note = None
    if gold is None:
        tolerance = torch.full_like(row_error, TOLERANCE[dtype])
    else:
        exact = gold.to(torch.float64).flatten(1)
        eager_error = (ref - exact).norm(dim=1) / exact.norm(dim=1).clamp_min(1e-300)
        tolerance = (GOLD_MULTIPLIER * eager_error).clamp_min(ROW_ROUNDING[dtype])
    worst = int((row_error / tolerance).nan_to_num(float("inf")).argmax())
    if gold is not None:
        note = (f"tolerance of row {worst}: the larger of {ROW_ROUNDING[dtype]:g} and {GOLD_MULTIPLIER:g} x eager's "
                f"own error against fp32 in that row ({eager_error[worst]:.4f})")
    return whole.model_copy(update={"worst_row": worst, "rel_l2_error": row_error[worst].item(),
                                    "tolerance": tolerance[worst].item(),
                                    "passed": bool((row_error <= tolerance).all()),
                                    "note": note})


def beyond_call_noise(output: torch.Tensor, checked: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """How far a timed call's output is from the checked call's, at its worst element, as a share of that element's
    allowance (a scalar on their device; over 1: beyond noise): CALL_TO_CALL_NOISE of the dtype times the larger of the
    element's magnitude and its row's RMS (an element near zero after cancellation moves with the row's scale)."""
    difference = (output.float() - checked.float()).abs().flatten(1)
    scale = checked.float().abs().flatten(1)
    rms = scale.pow(2).mean(1, keepdim=True).sqrt()
    allowance = CALL_TO_CALL_NOISE[dtype] * torch.maximum(scale, rms)
    return (difference / allowance.clamp_min(1e-30)).amax()
