from enum import IntEnum


class ExitCode(IntEnum):
    """mlcbench's exit codes (the README lists them)."""

    OK = 0
    ENVIRONMENT = 1  # the machine failed us: database down, disk full, no Docker engine
    USAGE = 2  # a mistake in the command or its inputs
    JOBS_FAILED = 3  # the sweep ran, and some jobs did not end ok or unsupported
    INTERRUPTED = 130  # Ctrl-C or SIGTERM


class UsageError(Exception):
    """Bad input from the user: shown as one line on stderr, exit code 2, nothing written."""


class EnvironmentFailure(Exception):
    """The machine failed us (database down, disk full): shown as one line on stderr, exit code 1."""
