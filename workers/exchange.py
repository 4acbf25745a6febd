"""The worker's files of the exchange (schema/protocol.py): a file of JobSpecs in, one Result line appended and
forced to disk per finished job."""

import os
from pathlib import Path
from typing import Optional

from pydantic import BaseModel, ValidationError

from mlcbench.schema import JobSpec
from mlcbench.schema.protocol import encode_line

MAX_LINE_BYTES = 1 << 20


class JobFileError(Exception):
    """The job file cannot be used as a whole; nothing was run."""


def read_jobs(path: Path) -> list[JobSpec]:
    """Every job of a JSONL file, or a JobFileError naming the file, the line and the field at fault."""
    jobs = []
    try:
        with open(path, "rb") as handle:
            number = 0
            # readline ends a line at b"\n" only, as protocol.complete_lines does; bounded, so that a huge line is
            # not read whole
            while raw := handle.readline(MAX_LINE_BYTES + 1):
                number += 1
                if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                    raise JobFileError(f"{path}:{number}: line over the {MAX_LINE_BYTES}-byte limit")
                job = _parse_job(path, number, raw)
                if job is not None:
                    jobs.append(job)
    except OSError as error:
        raise JobFileError(f"{path}: cannot read job file ({error})") from None
    return jobs


def _parse_job(path: Path, number: int, raw: bytes) -> Optional[JobSpec]:
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise JobFileError(f"{path}:{number}: not UTF-8 text (byte {error.start} of the line)") from None
    if not line.strip():
        return None
    try:
        return JobSpec.model_validate_json(line)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "(line)"
        raise JobFileError(f"{path}:{number}: field {field}: {first['msg']}") from None


def append_model(path: Path, model: BaseModel) -> None:
    """Append a result (or the device's ceilings) as one line and force it to disk: a crash after this call cannot
    lose it."""
    _append(path, encode_line(model))


def append_line(path: Path, text: str) -> None:
    """Append a line of plain text (a job id) and force it to disk."""
    _append(path, text + "\n")


def _append(path: Path, line: str) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())
