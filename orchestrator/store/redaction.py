"""Secrets (tokens for real checkpoints) reach workers as environment variables at run time only: never an image
layer, a label, a log line or a stored result."""

import json
import os
from typing import Mapping, Optional

from mlcbench.schema import Result

# Host variables handed to workers at run time.
SECRETS = ("HF_TOKEN",)
MASK = "***"
# shorter values would mask ordinary text ("1", "yes") rather than a secret
MIN_SECRET_CHARS = 8


def secret_values(environ: Optional[Mapping[str, str]] = None) -> list[str]:
    environ = os.environ if environ is None else environ
    return [environ[name] for name in SECRETS if len(environ.get(name, "")) >= MIN_SECRET_CHARS]


def redact(result: Result, environ: Optional[Mapping[str, str]] = None) -> Result:
    """The result with every secret value masked wherever it appears (a worker may echo its environment in an
    error or a log tail)."""
    values = [json.dumps(value)[1:-1] for value in secret_values(environ)]  # as they appear inside JSON strings
    text = result.model_dump_json()
    if not any(value in text for value in values):
        return result
    for value in values:
        text = text.replace(value, MASK)
    return Result.model_validate_json(text)
