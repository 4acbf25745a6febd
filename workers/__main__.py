import sys
from pathlib import Path

from mlcbench.schema.protocol import ZYGOTE_COMMAND


def main(argv: list[str] | None = None) -> int:
    """`run` (the worker) or `zygote` (workers/zygote.py)."""
    arguments = sys.argv[1:] if argv is None else argv
    if arguments[:1] == [ZYGOTE_COMMAND]:
        from mlcbench.workers.zygote import serve

        return serve(Path(arguments[1]))
    from mlcbench.workers.command import run

    return run(argv)


if __name__ == "__main__":
    sys.exit(main())
