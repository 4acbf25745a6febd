"""Inductor's on-disk caches (FX graphs, AOTAutograd, Triton kernels, autotuning results) in the env's cache folder,
in a subfolder named after everything that makes a compiled kernel invalid elsewhere: the image, the interpreter,
the torch and Triton versions, the GPU and mlcbench's worker code (code_key.py: dynamo's precompile cache, below,
loads graphs without tracing the code that built them). A stale cache is never read; the next worker process finds a
warm one.

Where torch has it, dynamo's precompile cache lives beside them: the traced graphs and their guards. With Inductor's
caches alone a warm process still traces the whole model in dynamo again (on a 32-layer Llama most of a warm compile);
with it a warm process checks the saved guards and loads the compiled graphs.

Before torch 2.12 a kernel loaded from those caches forgot the launch config coordinate-descent tuning had found for it
in an earlier process and was tuned again at its first run (pytorch/pytorch#172819): inside the block torch 2.12's
fix stands in (keep_tuned_configs)."""

import hashlib
import logging
import os
import platform
import re
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional

from mlcbench.schema.protocol import IMAGE_DIGEST_ENV
from mlcbench.workers.stacks.code_key import worker_code

if TYPE_CHECKING:
    import torch

    from mlcbench.schema import JobSpec


def cache_key(python: str, torch_version: str, triton_version: Optional[str], device: str,
              image_digest: Optional[str], code: str) -> str:
    parts = [f"py{python}", f"torch{torch_version}", f"triton{triton_version or '-none'}", device, f"code{code[:16]}"]
    if image_digest:
        parts.append(f"image{image_digest.removeprefix('sha256:')[:16]}")
    return re.sub(r"[^A-Za-z0-9.+_-]", "_", "-".join(parts))


def current_key(device: "torch.device") -> str:
    import torch

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        device_name = f"{props.name}-sm{props.major}{props.minor}"
    else:
        device_name = f"cpu-{platform.machine()}"
    return cache_key(platform.python_version(), torch.__version__, triton_version, device_name,
                     os.environ.get(IMAGE_DIGEST_ENV), worker_code())


def install_keys() -> list[Callable[[], object]]:
    """The keys of their own installs that Inductor's caches are keyed by, each computed once per process and kept by
    torch or Triton: torch's hash of its sources (torch_key) and, with Triton, Triton's of its sources and its
    400-MB library (triton_key; torch 2.13 keeps it in codecache, older torch asks Triton, which keeps it itself)."""
    from torch._inductor import codecache

    keys: list[Callable[[], object]] = [codecache.torch_key]
    try:
        from torch._inductor.runtime.triton_compat import HAS_TRITON, triton_key
    except ImportError:  # a torch without triton_compat (before 2.6) hashes Triton's install elsewhere, if at all
        return keys
    if HAS_TRITON:
        keys.append(getattr(codecache, "triton_key", triton_key))
    return keys


def hash_installs_ahead() -> "Future[float]":
    """Compute install_keys() on a thread, beside whatever the process does next (building the model): without it,
    the first compile computes them, and a warm compile waits for the hashes of whole installs; the build takes a
    little longer for it, both holding the interpreter's lock. A compile that asks for a key
    while the thread computes it waits for it (torch 2.13) or computes it again (older torch and Triton keep their
    keys in caches without a lock). The future's value is the thread's seconds."""

    def compute() -> float:
        begin = time.perf_counter()
        for key in install_keys():
            key()
        return time.perf_counter() - begin

    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="install-keys")
    try:
        return executor.submit(compute)
    finally:
        executor.shutdown(wait=False)


# where Inductor and Triton write, read by them at each compile (use_cache_folder sets them)
CACHE_VARIABLES = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


def use_cache_folder(root: Path, device: "torch.device", shape: Optional[str] = None) -> Path:
    """Point Inductor at root/inductor/<key> (or its subfolder `shape`) and Triton at root/inductor/<key>/triton for
    every compile from now on in this process."""
    folder = root / "inductor" / current_key(device)
    # set explicitly: Inductor pins TRITON_CACHE_DIR to its cache folder of the moment at its first kernel
    os.environ["TRITON_CACHE_DIR"] = str(folder / "triton")
    if shape is not None:
        folder = folder / shape
    folder.mkdir(parents=True, exist_ok=True)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(folder)
    return folder


def job_shape(spec: "JobSpec") -> str:
    """An LLM job's precompile_shape: what the guards of its compiled decode check, and the options it compiles with
    (a package loads whole, whatever the options: one compiled without PDL must never serve a job that asks for it)."""
    # a checkpoint may differ from the catalog's config in what the guards see (its EOS ids, for one)
    weights = hashlib.sha256(spec.model_path.encode()).hexdigest()[:12] if spec.model_path else "random"
    # two configs under one name (a suite's own model, a catalog row changed) must not share compiled graphs: the
    # guards kept leave out the config values a graph holds as constants (a norm's epsilon)
    model = f"{spec.model}-{hashlib.sha256(spec.info.model_dump_json().encode()).hexdigest()[:12]}"
    options = spec.options.model_dump_json(exclude_defaults=True)
    variant = "" if options == "{}" else f"-options{hashlib.sha256(options.encode()).hexdigest()[:12]}"
    return f"{model}-{weights}-{spec.precision}-b{spec.batch_size}-in{spec.input_len}-out{spec.output_len}{variant}"


def compile_for_warm_start(fn: Callable, **compile_kwargs: Any) -> Callable:
    """torch.compile(fn, **compile_kwargs), made for dynamo's precompile cache:
    - graphs the cache loads keep the CUDA graphs the compile's mode or options ask for. The cache loads inside
      torch.compile() and decides on CUDA graphs from Inductor's global `triton.cudagraphs` (off unless set), not from
      the compile's options (torch 2.11-2.13, `deserialize_bundled_cache_entry`): without this a warm process replays
      no CUDA graph and runs launch-bound, TinyLlama b1 at a third of the cold process's tokens/s on an H200.
    - its guards are on tensors, shapes and global state alone (guards_kept). A `mode` becomes the options it stands
      for: torch.compile takes a guard filter only among options, and options not beside a mode."""
    import torch
    from torch._inductor import list_mode_options

    mode = compile_kwargs.pop("mode", None)
    options = {**(list_mode_options(mode) if mode else {}), **(compile_kwargs.pop("options", None) or {})}
    if hasattr(torch.compiler, "skip_guard_on_all_nn_modules_unsafe"):  # a torch that takes guard_filter_fn
        options["guard_filter_fn"] = guards_kept
    with torch._inductor.config.patch({"triton.cudagraphs": bool(options.get("triton.cudagraphs", False))}):
        return torch.compile(fn, options=options, **compile_kwargs)


# the guards a compile kept for warm starts builds: on tensors (parameters and buffers included: shape, strides, dtype,
# device), on the symbolic shapes' ranges, on which inputs do not alias, and on the process's global state (grad mode
# and the like); none on other objects' attributes, identities or values. Not DUPLICATE_INPUT, the guard that two
# inputs are one tensor (tied embeddings: embed_tokens.weight is lm_head.weight): its source runs through the modules,
# which the precompile cache saves only as placeholders once their own guards are dropped, so a warm process failed
# to build it ("'_Missing' object has no attribute '_parameters'", torch 2.13). Whether weights are tied is the
# model's config, which the job's cache folder fixes (job_shape).
GUARDS_KEPT = frozenset({"TENSOR_MATCH", "SHAPE_ENV", "NO_TENSOR_ALIASING", "GLOBAL_STATE", "GRAD_MODE",
                         "DETERMINISTIC_ALGORITHMS", "TORCH_FUNCTION_STATE", "DEFAULT_DEVICE",
                         "AUTOGRAD_SAVED_TENSORS_HOOKS"})


def guards_kept(entries: list[Any]) -> list[bool]:
    """dynamo's guard filter for the compiles above: the guards of GUARDS_KEPT, and those on an int's value. Every
    call checks a compiled function's guards, and every warm process builds them again from the precompile cache
    (twice, torch 2.11-2.13): with every guard kept, that rebuild is a large share of a warm start. Of the 6,671 guards of a 32-layer Llama's decode forward on a static cache (torch 2.13,
    here) GUARDS_KEPT alone kept 438 (the int guards are not counted in that figure); the rest are on module
    attributes (hooks, flags, config values), on the KV cache object's and on transformers' globals. What they check,
    the job's cache folder already fixes (job_shape: the model, its config, the options, the workflow's cache).
    An int, though, may be what varies between calls: transformers' sliding-window cache layer (Mistral's) counts its
    tokens in a Python int (StaticSlidingWindowLayer.cumulative_length_int). Without its guard every decode step ran
    the graph traced at the first, with that step's count: a Mistral-style model's logits parted from eager's by a
    relative L2 of 0.2-0.5. With it, the second step traces the count as a symbolic int, once."""
    return [entry.guard_type in GUARDS_KEPT or _on_an_int(entry) for entry in entries]


def _on_an_int(entry: Any) -> bool:
    return entry.guard_type in ("CONSTANT_MATCH", "EQUALS_MATCH") and entry.has_value \
        and type(entry.value) is int  # not a bool (a flag the job's cache folder fixes)


def forget_installed_globals(namespace: dict[str, object], imported: frozenset[str]) -> None:
    """Drop what dynamo installed in a module's globals (`namespace`, which held the names `imported` once the module
    was imported) for an earlier job's compiled functions. A package loaded from dynamo's precompile cache installs
    them without the cleanup that torch._dynamo.reset() runs, and the next trace in this process then fails on a name
    that already exists ("__builtins_dict___0"; torch 2.13)."""
    for name in set(namespace) - imported:
        del namespace[name]


def recheck_autotune_cache(self, reload_kernel_from_src: Callable[[], Any]) -> None:
    """CachingAutotuner.recheck_autotune_cache as torch 2.12 fixed it (pytorch/pytorch#172819), for a kernel loaded
    from Inductor's caches: take the best config an earlier process stored for it, and keep its found_by_coordesc, so
    that the kernel's first run does not tune it again. torch 2.9 and 2.11 (their wheels' source; 2.7 has no such
    method) ignore the stored config of a kernel with one config (every kernel outside max-autotune) and drop the flag
    of the others: a warm torch_compile_decode process ran coordinate descent on its statically launched kernels
    again, at every warm start."""
    from torch._inductor.runtime.triton_heuristics import check_autotune_cache, triton_config_to_hashable

    configs = [result.config for result in self.compile_results]
    cached, _, self.autotune_cache_info = check_autotune_cache(configs, self.filename, self.inductor_meta)
    if len(cached) != 1:
        return
    best = cached[0]
    found_by_coordesc = getattr(best, "found_by_coordesc", False)
    for result in self.compile_results:
        if triton_config_to_hashable(result.config) == triton_config_to_hashable(best):
            result.config.found_by_coordesc = found_by_coordesc
            self.compile_results = [result]
            return
    # tuned after the kernel was stored: compile that config now
    if self.fn.fn is None:
        self.fn = reload_kernel_from_src().fn
    self.compile_results = [self._precompile_config(best)]


@contextmanager
def keep_tuned_configs() -> Iterator[None]:
    """Inside the block, kernels loaded from Inductor's caches keep the launch configs tuned in earlier processes:
    torch 2.12's recheck_autotune_cache in place of an older torch's (nothing changes from 2.12 on, or in a torch
    without it)."""
    import torch
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    if torch.torch_version.TorchVersion(torch.__version__) >= (2, 12) or \
            not hasattr(CachingAutotuner, "recheck_autotune_cache"):
        yield
        return
    original = CachingAutotuner.recheck_autotune_cache
    CachingAutotuner.recheck_autotune_cache = recheck_autotune_cache
    try:
        yield
    finally:
        CachingAutotuner.recheck_autotune_cache = original


@contextmanager
def warm_start_caches(root: Path, device: "torch.device",
                      precompile_shape: Optional[str] = None) -> Iterator[tuple[str, ...]]:
    """The caches a compiled workflow's preparation and first call use, named as the block's value. After the block
    the process's cache variables are as they were, so the worker's next job does not compile into this job's folder
    (a precompile shape's, for one)."""
    before = {name: os.environ.get(name) for name in CACHE_VARIABLES}
    try:
        with keep_tuned_configs(), _caches(root, device, precompile_shape) as caches:
            yield caches
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def _caches(root: Path, device: "torch.device", precompile_shape: Optional[str]) -> Iterator[tuple[str, ...]]:
    """warm_start_caches without restoring the cache variables.

    With `precompile_shape` (everything the compiled functions' guards check: model, dtype, batch, lengths), dynamo's
    precompile cache is on inside the block and written when the block's compiles succeed, in a folder of that shape
    alone: a process that loads a function's saved graphs and then has to trace that function again, for a shape the
    package lacks, fails (a global name installed twice; torch 2.13), so a package must only ever meet its own shape.
    Inductor's caches move into the same folder (the graphs are per shape anyway); Triton's kernels stay shared.
    Its guards leave out object identities (ID_MATCH, a warning per guard, silenced here): the compiled functions must
    take the model as an argument, so a loaded graph never holds another job's module. Off after the block, so the
    worker's other jobs compile as they would without mlcbench."""
    import torch

    config = torch._dynamo.config
    if precompile_shape is None or not hasattr(config, "caching_precompile"):  # off, or torch without it
        use_cache_folder(root, device)
        yield ("inductor",)
        return
    from torch._dynamo.precompile_context import PrecompileContext
    from torch._dynamo.utils import counters

    use_cache_folder(root, device, precompile_shape)
    guard_log = logging.getLogger("torch._dynamo.guards")
    level = guard_log.level
    guard_log.setLevel(logging.ERROR)
    # what this block records is what it saves: not what earlier jobs in this process compiled for other shapes
    PrecompileContext.clear()
    traced_before = counters["stats"]["unique_graphs"]
    try:
        with config.patch(caching_precompile=True):
            yield ("inductor", "dynamo_precompile")
            # a package loaded whole is already on disk (and saving it again would write it without its graphs)
            if counters["stats"]["unique_graphs"] > traced_before:
                torch.compiler.save_cache_artifacts()
    finally:
        guard_log.setLevel(level)
