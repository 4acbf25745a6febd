"""`python -m mlcbench.orchestrator` and the `mlcbench` command. Ctrl-C at any moment, even while the command's
modules are still being imported, ends it with exit code 130 and one line, never a traceback."""

import sys

from mlcbench.orchestrator.errors import ExitCode


def main() -> None:
    try:
        from mlcbench.orchestrator.cli import app

        app(prog_name="mlcbench")
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(ExitCode.INTERRUPTED)


if __name__ == "__main__":
    main()
