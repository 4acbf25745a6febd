"""The worker's side of the JSONL protocol: a file of JobSpecs in, one Result line appended per finished job."""

import os
from pathlib import Path

from pydantic import ValidationError

from schema import JobSpec, Result

MAX_LINE_BYTES = 1 << 20


class JobFileError(Exception):
    """The job file cannot be used as a whole; nothing was run."""


def read_jobs(path: Path) -> list[JobSpec]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise JobFileError(f"{path}: cannot read job file ({error})") from None
    jobs = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if len(line) > MAX_LINE_BYTES:
            raise JobFileError(f"{path}:{number}: line of {len(line)} bytes is over the {MAX_LINE_BYTES}-byte limit")
        try:
            jobs.append(JobSpec.model_validate_json(line))
        except ValidationError as error:
            first = error.errors()[0]
            field = ".".join(str(part) for part in first["loc"]) or "(line)"
            raise JobFileError(f"{path}:{number}: field {field}: {first['msg']}") from None
    return jobs


def append_result(path: Path, result: Result) -> None:
    """Append one line and force it to disk: a crash after this call cannot lose the result."""
    append_line(path, result.model_dump_json())


def append_line(path: Path, line: str) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")
        handle.flush()
        os.fsync(handle.fileno())
