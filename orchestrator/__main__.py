"""`python -m mlcbench.orchestrator` and the `mlcbench` command. Ctrl-C at any moment, even while the command's
modules are still being imported, ends it with exit code 130 and one line, never a traceback."""

import atexit
import os
import signal
import sys

from mlcbench.orchestrator.errors import ExitCode


def main() -> None:
    try:
        from mlcbench.orchestrator.cli import app

        app(prog_name="mlcbench")
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        _exit_interrupted()
    except SystemExit as ending:
        if ending.code == ExitCode.INTERRUPTED:
            _exit_interrupted()
        _exit_finished(ending.code)
    except Exception as error:
        # a Ctrl-C inside an extension module's initialisation comes out as that module's own error (an ImportError
        # "... initialization failed"), raised while the KeyboardInterrupt was being handled
        if not _raised_by_ctrl_c(error):
            raise
        print("interrupted", file=sys.stderr)
        _exit_interrupted()


def _raised_by_ctrl_c(error: BaseException) -> bool:
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def _exit_finished(code: object) -> None:
    """Exit with the command's own code. A Ctrl-C that lands once the command has finished has nothing left to stop:
    it is ignored from here on, and the process ends without CPython's finalization, which ends it by SIGINT (exit
    -2) when a Ctrl-C landed inside an extension module's own Python code, whatever code was asked for."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if isinstance(code, str):
        print(code, file=sys.stderr)
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code if isinstance(code, int) else 0 if code is None else 1)


def _exit_interrupted() -> None:
    """Exit 130 at once: a Ctrl-C that landed while an extension module ran Python code of its own (PyRun_String, at
    import) leaves CPython set to end the process by SIGINT after finalizing, whatever exit code was asked for."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(ExitCode.INTERRUPTED)


if __name__ == "__main__":
    main()
