"""What a torchax process after the first must not redo: tracing the model in Python.

JAX's persistent compilation cache is keyed by the lowered program, so a process reaches it only after tracing the
model through torchax's Python dispatch for every shape it calls: with a greedy loop without a KV cache, one trace per
sequence length, most of a warm process's compile (on the 2-core CPU a 22-layer Llama's warm process spent 16 s of
its 20 s tracing, all 45 XLA programs found in the cache). Here each shape's trace is exported once (StableHLO,
jax.export) into a folder named after everything the trace depends on, and every process, the first included, runs
the exported program: the same computation with the weights as arguments, found in JAX's cache by the same key in
every process. A stale trace is never read: the folder's key (code_key.artifact_key) changes with the model, its
dtype, the options, the traced module's code, mlcbench's worker code and every version involved; the file's name holds
the input's shape and dtype."""

import functools
import importlib.metadata
import inspect
import os
import platform
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Literal, Optional

from mlcbench.schema import CacheCounts
from mlcbench.workers.stacks.code_key import artifact_key as trace_key  # noqa: F401  (torchax's traces' folder)

if TYPE_CHECKING:
    import torch

TRACES = "jax_traces"  # the exported traces' folder in the workflow's cache folder
# the installs whose code a trace runs through
TRACED_PACKAGES = ("jax", "jaxlib", "torchax", "torch", "transformers")
_HIT, _MISS = "/jax/compilation_cache/cache_hits", "/jax/compilation_cache/cache_misses"


def trace_parts(module: "torch.nn.Module", env: Any, platform_name: str, options: str) -> dict[str, str]:
    """Everything a module's trace depends on: the installs' versions, the interpreter, the platform it is lowered
    for, torchax's config, the traced module's own code, its model's config, its weights' names, shapes and dtypes
    (passed as arguments, so not their values), and the job's options."""
    parts = {package: _version(package) for package in TRACED_PACKAGES}
    parts.update(python=platform.python_version(), platform=platform_name, torchax_config=repr(env.config),
                 code=inspect.getsource(type(module)), options=options,
                 weights=";".join(f"{name}:{tuple(tensor.shape)}:{tensor.dtype}"
                                  for name, tensor in [*module.named_parameters(), *module.named_buffers()]))
    config = getattr(getattr(module, "model", module), "config", None)
    if config is not None:
        parts["config"] = config.to_json_string()
    return parts


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "-none"


class JaxCompileCounts:
    """JAX's persistent-cache hits and misses while listening (its monitoring events), and the traces loaded or
    exported: a process's CacheCounts and cold/warm label."""

    def __init__(self) -> None:
        self.hits = self.misses = self.traces_loaded = self.traces_exported = 0
        self._lock = threading.Lock()  # programs compile on several threads at once (ExportedForward.ready)

    def _on_event(self, event: str, **_: object) -> None:
        with self._lock:
            if event == _HIT:
                self.hits += 1
            elif event == _MISS:
                self.misses += 1

    @contextmanager
    def listening(self) -> Iterator["JaxCompileCounts"]:
        import jax

        jax.monitoring.register_event_listener(self._on_event)
        try:
            yield self
        finally:
            jax.monitoring.unregister_event_listener(self._on_event)

    def counts(self) -> CacheCounts:
        return CacheCounts(jax_hits=self.hits, jax_misses=self.misses, traces_loaded=self.traces_loaded,
                           traces_exported=self.traces_exported)

    def state(self) -> Optional[Literal["cold", "warm"]]:
        """cold: a program was compiled or a trace made; warm: everything came from the caches; None: nothing
        compiled."""
        if self.misses or self.traces_exported:
            return "cold"
        if self.hits or self.traces_loaded:
            return "warm"
        return None


class ExportedForward:
    """A torchax module's forward, called with torchax tensors like torchax.compile's JittableModule (weights and
    buffers as jit arguments, one program per input shape), each shape's program run from its exported trace in
    `folder`: exported there by the first process that needs it, loaded by every later one.

    The first call also readies the programs of the next `lengths` - 1 sequence lengths (a greedy loop without a KV
    cache calls one per step): traced one after another (Python), each compiled, or loaded from JAX's cache, on a
    thread as soon as it is traced, while the next is traced (XLA compiles outside the interpreter's lock), each the
    program the call would compile. `phases` gets the seconds spent tracing (or loading traces) and in all."""

    def __init__(self, module: "torch.nn.Module", folder: Path, counts: JaxCompileCounts, lengths: int = 1,
                 phases: Optional[dict] = None):
        import jax
        from torchax import interop

        self.jax, self.interop, self.folder, self.counts, self.lengths = jax, interop, folder, counts, lengths
        self.phases = phases if phases is not None else {}
        jittable = interop.JittableModule(module)
        self.weights = interop.jax_view((jittable.params, jittable.buffers))
        self.traced = jax.jit(interop.jax_view(functools.partial(jittable.functional_call, "forward")))
        self.programs: dict[tuple[tuple[int, ...], str], Any] = {}

    def __call__(self, input_ids: "torch.Tensor") -> "torch.Tensor":
        ids = self.interop.jax_view(input_ids)
        key = (tuple(ids.shape), str(ids.dtype))
        if not self.programs:
            batch, length = ids.shape
            self.ready([self.jax.ShapeDtypeStruct((batch, length + step), ids.dtype) for step in range(self.lengths)])
        program = self.programs.get(key)
        if program is None:
            program = self.programs[key] = self.jax.jit(self._exported(ids).call)
        return self.interop.torch_view(program(*self.weights, ids))

    def ready(self, inputs: list[Any]) -> None:
        """Compiled programs for these inputs' shapes and dtypes (jax.ShapeDtypeStruct), on as many threads as this
        process may use cores."""
        def compiled(exported: Any, spec: Any) -> Any:
            return self.jax.jit(exported.call).lower(*self.weights, spec).compile()

        begin = time.perf_counter()
        tracing_s = 0.0
        with ThreadPoolExecutor(max_workers=max(1, min(len(inputs), len(os.sched_getaffinity(0))))) as pool:
            futures = []
            for spec in inputs:
                traced_from = time.perf_counter()
                exported = self._exported(spec)
                tracing_s += time.perf_counter() - traced_from
                futures.append(pool.submit(compiled, exported, spec))
            programs = [future.result() for future in futures]
        self.phases.update(traces_s=round(tracing_s, 4), programs_ready_s=round(time.perf_counter() - begin, 4))
        self.programs.update({(tuple(spec.shape), str(spec.dtype)): program
                              for spec, program in zip(inputs, programs)})

    def path(self, ids: Any) -> Path:
        return self.folder / f"{'x'.join(map(str, ids.shape))}-{ids.dtype}.jax_exported"

    def _exported(self, ids: Any) -> Any:
        path = self.path(ids)
        try:
            serialized = bytearray(path.read_bytes())
            self.counts.traces_loaded += 1
        except FileNotFoundError:
            serialized = self.jax.export.export(self.traced)(*self.weights, ids).serialize()
            _write_atomically(path, serialized)
            self.counts.traces_exported += 1
        # the first process too runs what it wrote: the same program as every later one, so the same cache key
        return self.jax.export.deserialize(serialized)


def _write_atomically(path: Path, data: bytes) -> None:
    """Another process may read the file meanwhile: it finds it whole or not at all."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
