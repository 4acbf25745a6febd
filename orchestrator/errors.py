from enum import IntEnum


class ExitCode(IntEnum):
    """mlcbench's exit codes, the same for every command (the README's table is MEANINGS, tested)."""

    OK = 0
    ENVIRONMENT = 1
    USAGE = 2
    JOBS_FAILED = 3
    INTERRUPTED = 130


MEANINGS = {
    ExitCode.OK: "done (a sweep: every job ended `ok`, its check passed and no worker process lost, or "
                 "`unsupported`)",
    ExitCode.ENVIRONMENT: "the environment failed: database down, disk full, no Docker engine, Slurm not answering, "
                          "a store that cannot be written (`error: ...` on stderr, found before any row is stored "
                          "where it can be)",
    ExitCode.USAGE: "a mistake in the command or its inputs (`error: ...` on stderr, nothing written)",
    ExitCode.JOBS_FAILED: "a sweep ran and some jobs ended `failed`, `oom`, `timeout` or `crashed`, failed their "
                          "correctness check against eager, or lost a worker process (the closing line counts each)",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C or SIGTERM); what finished is stored, the same command resumes",
}


def exit_code_table() -> str:
    """The README's table of exit codes (Markdown)."""
    return "\n".join(["| exit code | meaning |", "|---|---|",
                      *(f"| `{code.value}` | {MEANINGS[code]} |" for code in ExitCode)]) + "\n"


class UsageError(Exception):
    """Bad input from the user: shown as one line on stderr, exit code 2, nothing written."""


class EnvironmentFailure(Exception):
    """The machine failed us (database down, disk full): shown as one line on stderr, exit code 1."""
