"""A worker whose orchestrator died (SIGKILL, crash) ends too, instead of running its jobs for nobody.

The local runtime starts the worker in its own session (so that killing the worker's process group takes its
compilers along); the same isolation would let it outlive its parent. Containers need none of this: a restarted
orchestrator removes them by label."""

import os
import signal
import threading
import time

from mlcbench.schema.protocol import ORCHESTRATOR_PID_ENV

CHECK_S = 1.0


def exit_with_parent() -> None:
    """Watch in the background for this process being re-parented (its parent died), then kill the worker. A worker
    whose orchestrator died before this ran (between its fork and here) ends at once: the orchestrator names itself
    (ORCHESTRATOR_PID_ENV), since by now the worker's parent would be whatever adopted it."""
    named = os.environ.get(ORCHESTRATOR_PID_ENV, "")
    parent = int(named) if named.isdigit() else os.getppid()
    if parent <= 1:  # started by init (a container's PID 1, a daemon): no orchestrator process to outlive
        return
    if os.getppid() != parent:
        _end()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(CHECK_S)
        _end()

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _end() -> None:
    if os.getpgrp() == os.getpid():  # leader of its own group: take the compilers' processes along
        os.killpg(os.getpid(), signal.SIGKILL)
    os._exit(1)
