class UsageError(Exception):
    """Bad input from the user: shown as one line on stderr, exit code 2, nothing written."""
