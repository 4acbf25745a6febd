"""A pre-imported interpreter that forks one fresh worker per request (protocol.ForkRequest on stdin, one
protocol.ZygoteEvent line per answer on stdout).

Every worker process pays the interpreter's start and the imports of torch, Inductor and transformers before its first
timed call: seconds each, against milliseconds of timed work for a synthetic cell. A child forked after those imports
and before anything touches CUDA is still a fresh process for CUDA, the allocator, dynamo and Inductor (none of them
has state yet), and skips them. A zygote that finds CUDA initialised, a second thread or a child process after its
imports (any of which a fork would copy half of) says so (`unsafe`) and forks nothing; the host then starts each worker
as a new interpreter. The host starts a zygote afresh for each round of a GPU's cells, so the processes of one cell
come from different interpreters (memory layout, hash seed) as exec'd ones would."""

import importlib
import os
import random
import selectors
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Optional

from mlcbench.schema.protocol import (ORCHESTRATOR_PID_ENV, STARTUP_ENV, ForkRequest, ZygoteEvent, complete_lines,
                                      encode_line)
from mlcbench.workers.cache_environment import use_cache_folder_only

# what every worker imports before its first timed call; each child finds them imported
PRELOAD = ("torch", "torch._inductor.compile_fx", "transformers.models.llama.modeling_llama",
           "mlcbench.workers.runner", "mlcbench.workers.measurement.core", "mlcbench.workers.measurement.llm",
           "mlcbench.workers.measurement.synthetic", "mlcbench.workers.workflows")
REAP_EVERY_S = 0.05
NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"
# a forked child's exit code when torch says CUDA cannot be initialised in it
BAD_FORK = 3
STDIN = 0


def serve(cache_dir: Path) -> int:
    begin = time.perf_counter()
    # before the imports: some libraries read their folders once, as they load (Hugging Face's, Python's tempdir)
    use_cache_folder_only(cache_dir)
    # torch.cuda.is_available(), which importing transformers calls, asks the CUDA runtime for its devices and so
    # marks every later fork as "bad" (CUDA cannot be initialised in the child); asked through NVML it does not. The
    # children ask as exec'd workers do.
    os.environ[NVML_CHECK] = "1"
    for module in PRELOAD:
        try:
            importlib.import_module(module)
        except ImportError:  # an env without transformers (or Inductor) still forks what it has
            continue
    os.environ.pop(NVML_CHECK)
    unsafe = why_not_fork()
    _say(ZygoteEvent(ready=unsafe is None, preload_s=round(time.perf_counter() - begin, 4), unsafe=unsafe))
    if unsafe is not None:
        return 1
    children: set[int] = set()
    selector = selectors.DefaultSelector()
    selector.register(STDIN, selectors.EVENT_READ)
    pending, open_input = b"", True
    while open_input or children:
        if open_input and selector.select(REAP_EVERY_S):
            data = os.read(STDIN, 1 << 16)
            open_input = bool(data)  # closed by the host (a new round) or its death: end once the children have
            lines, consumed = complete_lines(pending + data)
            pending = (pending + data)[consumed:]
            for line in lines:
                pid = _fork(ForkRequest.model_validate_json(line))
                children.add(pid)
                _say(ZygoteEvent(forked=pid))
        elif not open_input:
            time.sleep(REAP_EVERY_S)
        _reap(children)
    return 0


def why_not_fork() -> Optional[str]:
    """Why forking this interpreter would not give fresh workers (None: it would)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "CUDA was initialised by the imports"
    if threading.active_count() > 1:
        return f"the imports started threads ({', '.join(thread.name for thread in threading.enumerate())})"
    if _has_children():
        return "the imports started child processes"
    if torch is not None and _child_exit_code(lambda: BAD_FORK if torch.cuda._is_in_bad_fork() else 0) == BAD_FORK:
        return "torch marks its forks as unable to initialise CUDA (the imports asked the CUDA runtime for devices)"
    return None


def _child_exit_code(probe) -> int:
    pid = os.fork()
    if pid == 0:
        os._exit(probe())
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def _has_children() -> bool:
    try:
        with open(f"/proc/{os.getpid()}/task/{os.getpid()}/children") as handle:
            return bool(handle.read().strip())
    except OSError:
        return False


def _fork(request: ForkRequest) -> int:
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        os.setsid()  # its own process group: the host kills it with its compilers' processes
        log = os.open(request.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.chdir(request.cwd)
        # the zygote is this worker's parent: it ends when the host does, and its children with it
        os.environ.update({**request.env, ORCHESTRATOR_PID_ENV: str(os.getppid()), STARTUP_ENV: "fork"})
        random.seed()  # the zygote's state would make every child draw the same numbers
        from mlcbench.workers.command import run

        sys.argv = [sys.executable, "-m", "mlcbench.workers", *request.argv]
        code = run(request.argv)
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _reap(children: set[int]) -> None:
    for pid in list(children):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            children.discard(pid)
            _say(ZygoteEvent(exited=pid, exit_code=os.waitstatus_to_exitcode(status)))


def _say(event: ZygoteEvent) -> None:
    sys.stdout.write(encode_line(event))
    sys.stdout.flush()
