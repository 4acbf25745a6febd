"""`python -m mlcbench.orchestrator` and the `mlcbench` command. Ctrl-C at any moment, even while the command's
modules are still being imported, ends it with exit code 130 and one line, never a traceback."""

import os
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
        raise


def _exit_interrupted() -> None:
    """Exit 130 at once: a Ctrl-C that landed while an extension module ran Python code of its own (PyRun_String, at
    import) leaves CPython set to end the process by SIGINT after finalizing, whatever exit code was asked for."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(ExitCode.INTERRUPTED)


if __name__ == "__main__":
    main()
