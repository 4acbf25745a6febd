"""The steps every model kind's measurement shares: the workflow's compiler imported (compiler_import_s) and the
hashes of the installs its caches are keyed by started on a thread (install_keys_s), the model built (load_s), eager's
reference, the workflow's preparation and first call inside its `compiling` block (together the compile cost, with
what dynamo compiled there), the check of that first call against eager, one checked call of each other input set,
the timed calls cycling through the input sets (each one's output compared with its set's checked call's after they
all ran), the check of one call after them, and the memory peaks through the first call. A ModelKind (measurement/synthetic.py, measurement/llm.py) supplies what
differs: how its model is built and called, what its check compares, and the figures of its kind. Both kinds record
the same compile facts."""

import importlib
import time
from abc import ABC, abstractmethod
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Callable, ClassVar, ContextManager, Generic, Iterator, Mapping, Optional, TypeVar

import torch

from mlcbench.schema import REFERENCE, WORKFLOWS, Applied, Correctness, Metrics, ModelInfo, Timing
from mlcbench.schema.results import EnergyWindow, Setting, TimedWindow
from mlcbench.workers.interface import Prepared, Workflow, WorkflowContext, with_fields
from mlcbench.workers.measurement.clocks import clocks_during_calls
from mlcbench.workers.measurement.correctness import InputSetsChecked, with_input_sets, worst_of
from mlcbench.workers.measurement.dynamo_stats import compiled_graphs, dynamo_stats
from mlcbench.workers.measurement.energy import energy_meter
from mlcbench.workers.measurement.gate import Gate
from mlcbench.workers.measurement.probes import host_load
from mlcbench.workers.measurement.references import ReferenceCache, ReferenceState
from mlcbench.workers.measurement.timing import for_this_process, peak_memory, time_calls, timed_once
from mlcbench.workers.stacks import inductor_cache

Runs = TypeVar("Runs")


@dataclass
class KindFigures:
    """What a model kind measures beyond the shared steps: fields of its process's ProcessTiming and of Metrics."""

    process: dict[str, object] = field(default_factory=dict)
    metrics: dict[str, object] = field(default_factory=dict)


class ModelKind(ABC, Generic[Runs]):
    """One model kind's side of a measurement. It holds its model, inputs and eager's reference between the steps."""

    # the memory peaks count building the model and eager's reference too (else they start at the preparation)
    memory_counts_build: ClassVar[bool]
    # Applied fields a workflow that did not set them has on this kind
    applied_defaults: ClassVar[Mapping[str, object]] = {}

    def __init__(self, info: ModelInfo, ctx: WorkflowContext):
        self.info, self.ctx = info, ctx
        self.cuda = ctx.device.type == "cuda"

    @abstractmethod
    def build(self) -> None:
        """The model (and what it is called with) on the job's device, ready when this returns: timed as load_s."""

    @abstractmethod
    def reference(self, set_aside: Callable[[], ContextManager[None]], notes: dict[str, Setting]) -> ReferenceState:
        """Eager's output for the check (not called for eager itself), as tensors and plain values: what the
        reference cache stores, with `notes`. Memory used inside set_aside() counts in no peak."""

    @abstractmethod
    def use_reference(self, state: ReferenceState) -> None:
        """Hold reference()'s state for the check, whether this process computed it or read it from the cache (its
        tensors then on the CPU)."""

    @abstractmethod
    def prepare(self, workflow: Workflow, ctx: WorkflowContext) -> Prepared[Runs]:
        """The workflow's compile_module or prepare_llm."""

    @abstractmethod
    def first_call(self, prepared: Prepared[Runs]) -> Callable[[], object]:
        """The call timed as the rest of the compile cost, whose output is checked."""

    @abstractmethod
    def check(self, output: object) -> Optional[Correctness]:
        """The first call's output against eager's reference (None without one); raises where the output is not
        what the job asked for."""

    def check_input_sets(self, prepared: Prepared[Runs]) -> Optional[InputSetsChecked]:
        """One call of each input set checked against eager's output for it, before the timed calls cycle through the
        sets (each timed call is compared with its own set's checked call); None: this kind cycles none."""
        return None

    def check_again(self, prepared: Prepared[Runs]) -> Optional[Correctness]:
        """A call after the timed ones, on the caches, graphs and buffers they reused, checked as the first call is
        (None: this kind checks its first call only)."""
        return None

    @abstractmethod
    def call(self, prepared: Prepared[Runs]) -> Callable[[], object]:
        """One timed call."""

    @abstractmethod
    def keep_timed(self, output: object) -> None:
        """A timed call's output, handed over outside its timed interval: what check_timed compares is kept on the
        device (no synchronisation: the next call starts as soon as it would have)."""

    @abstractmethod
    def check_timed(self, checked: Correctness) -> Correctness:
        """The checked calls' correctness with every timed call's own output compared with what was checked (the
        timed call is the call checked): any that differs fails it."""

    @abstractmethod
    def after_timed_calls(self, prepared: Prepared[Runs], latency: Timing, notes: dict[str, Setting]) -> KindFigures:
        """This kind's figures, from the timed calls and calls of its own after them."""


@dataclass
class Measured:
    metrics: Metrics
    correctness: Optional[Correctness]
    # when the first timed call began (seconds since the epoch): the end of the process's start-up
    timed_from: Optional[float] = None


def import_compiler(workflow: str) -> Optional[float]:
    """Import the workflow's compiler (its catalog row's compiler_modules): the seconds it took, or None where the row
    names none. torch.compile imports Inductor at its first compile: 1.6-3 s on the H100's hosts, which no cache
    removes (benchmarks/README, fifth pass)."""
    info = WORKFLOWS.get(workflow)
    if info is None or not info.compiler_modules:
        return None
    begin = time.perf_counter()
    for module in info.compiler_modules:
        importlib.import_module(module)
    return time.perf_counter() - begin


@contextmanager
def exclusive_window(gate: Optional[Gate], cuda: bool) -> Iterator[list[TimedWindow]]:
    """The GPU alone while the block runs where the process shares it (a gate); yields the window's record holder."""
    if gate is None:
        yield []
        return
    with gate.exclusive(drain=cuda) as window:
        yield window


def measure(workflow: Workflow, kind: ModelKind, ctx: WorkflowContext, references: ReferenceCache,
            gate: Optional[Gate] = None) -> Measured:
    job, cuda, compiled = ctx.job, ctx.device.type == "cuda", workflow.name != REFERENCE
    compiler_import_s = import_compiler(workflow.name)
    install_keys = inductor_cache.hash_installs_ahead() if getattr(WORKFLOWS.get(workflow.name), "install_keys", False) \
        else None
    notes: dict[str, Setting] = {}  # the measurement's own provenance, stored beside the workflow's notes
    with torch.no_grad():
        # memory is sampled through the first call only: the NVML sampler thread would slow the timed calls
        with ExitStack() as through_first_call:
            memory = through_first_call.enter_context(peak_memory(cuda)) if kind.memory_counts_build else None
            begin = time.perf_counter()
            kind.build()
            load_s = time.perf_counter() - begin
            if compiled:  # where the peaks start after the reference, nothing it uses counts anyway
                set_aside = memory.set_aside if memory is not None else nullcontext
                kind.use_reference(references.provide(job, lambda own: kind.reference(set_aside, own), notes))
            if memory is None:
                memory = through_first_call.enter_context(peak_memory(cuda))
            compile_stats = through_first_call.enter_context(dynamo_stats())
            begin, compile_began = time.perf_counter(), time.time()
            with workflow.compiling(ctx) as caches:
                prepared = kind.prepare(workflow, ctx)
                prepare_s = time.perf_counter() - begin
                output, first_call_s = timed_once(kind.first_call(prepared), cuda, prepared.sync)
                compile_ended = time.time()
        # checked before more calls run: a workflow's CUDA graphs may write the next call's output into the same memory
        correctness = kind.check(output)
        input_sets = kind.check_input_sets(prepared) if correctness is not None else None
        graphs_before = compiled_graphs()
        timed = _time_alone(kind, prepared, ctx, gate, correctness is not None, notes)
        late_compiles = compiled_graphs() - graphs_before
        # a bug that shows only once a call reuses what an earlier one left (a cache, a graph's buffers) fails here
        again = kind.check_again(prepared)
        if correctness is not None:
            correctness = worst_of(correctness, again) if again is not None else correctness
            correctness = with_input_sets(correctness, input_sets) if input_sets is not None else correctness
            correctness = kind.check_timed(correctness)
    skips = {"cudagraph_skips": compile_stats.cudagraph_skips} if compile_stats.cudagraph_skips else {}
    notes.update(prepare_s=round(prepare_s, 4), first_call_s=round(first_call_s, 4), **compile_stats.phases,
                 **_install_keys_notes(install_keys), **skips)
    counter = prepared.cache_counter
    applied = with_fields(Applied.model_validate(kind.applied_defaults),
                          **prepared.applied.model_dump(exclude_unset=True), compile_caches=caches,
                          compiled_graphs=compile_stats.graphs)
    compile_stopped_s = gate.stopped_s(compile_began, compile_ended) if gate is not None else None
    shared = dict(window=timed.window[0], compile_stopped_s=round(compile_stopped_s or 0.0, 4)) if timed.window else {}
    metrics = Metrics(
        latency=for_this_process(timed.latency, correctness=correctness, **timed.cpu, **timed.figures.process,
                                 **shared, energy=timed.energy),
        compile_s=prepare_s + first_call_s - (compile_stopped_s or 0.0),
        compile_cache=compile_stats.compile_cache if counter is None else counter.state(),
        cache_counts=compile_stats.cache_counts if counter is None else counter.counts(),
        load_s=load_s, compiler_import_s=compiler_import_s,
        torch_peak_mem_bytes=memory.torch, nvml_peak_mem_bytes=memory.nvml,
        graph_breaks=compile_stats.graph_breaks if compiled else None,
        recompiles=compile_stats.recompiles + late_compiles if compiled else None,
        applied=applied, settings={**prepared.notes, **notes}, **timed.figures.metrics,
    )
    return Measured(metrics, correctness, timed.timed_from)


@dataclass
class _Timed:
    latency: Timing
    energy: EnergyWindow
    figures: KindFigures
    cpu: dict[str, object]
    window: list[TimedWindow]  # its one record where the process shared its GPU (a gate)
    timed_from: float


def _time_alone(kind: ModelKind, prepared: Prepared, ctx: WorkflowContext, gate: Optional[Gate], checked: bool,
                notes: dict[str, Setting]) -> _Timed:
    """The warm-up, the timed calls (over at least the energy counter's window, each kept for the check) and the
    kind's figures after them, with the GPU alone where the process shares it."""
    job, cuda = ctx.job, ctx.device.type == "cuda"
    energy = energy_meter(cuda, job.repeats, ctx.cache_dir.parent)
    with exclusive_window(gate, cuda) as window:
        timed_from = time.time()
        load_before = None if cuda else host_load()
        latency = time_calls(kind.call(prepared), job.warmup, job.repeats, cuda, prepared.sync,
                             clocks_during_calls(cuda), edges=[energy],
                             after_each=kind.keep_timed if checked else None, min_window_s=energy.min_window_s)
        cpu: dict[str, object] = {} if cuda else dict(
            cpu_threads=torch.get_num_threads(),
            host_load=[load for load in (load_before, host_load()) if load is not None])
        figures = kind.after_timed_calls(prepared, latency, notes)
    return _Timed(latency, energy.window.model_copy(update={"calls": latency.repeats}), figures, cpu, window,
                  timed_from)


def _install_keys_notes(install_keys) -> dict[str, Setting]:
    """The thread's seconds, or why it failed: the compile computed what the thread could not, so the job stands."""
    if install_keys is None:
        return {}
    error = install_keys.exception()
    if error is None:
        return {"install_keys_s": round(install_keys.result(), 4)}
    return {"install_keys_error": f"{type(error).__name__}: {error}"}
