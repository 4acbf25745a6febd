"""Eager's reference, computed once per key and read by every later process that checks against it (a sweep runs each
cell in several fresh processes, and every workflow of a model and batch checks against the same eager output).

The key (ReferenceKey) is everything the reference depends on. Its file, named by the key's hash, also holds the key
itself, which a read compares field by field: a file whose key differs (stale versions, a tampered or colliding
name), or that is truncated or unreadable, is never read; the reference is computed again and the file replaced.
Files are written whole to a temporary name and renamed, so concurrent writers of one key leave one valid file.
REFERENCE_CACHE_ENV=0 turns the cache off: every process computes its own and nothing is written."""

import hashlib
import json
import os
import platform
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import torch
from pydantic import Field

from mlcbench.schema import JobSpec
from mlcbench.schema.base import StrictModel
from mlcbench.schema.jobs import Precision
from mlcbench.schema.protocol import REFERENCE_CACHE_ENV
from mlcbench.schema.results import Setting
from mlcbench.workers.measurement.probes import gpu_info, package_versions
from mlcbench.workers.stacks.code_key import worker_code

# what a model kind's reference() returns and its use_reference() takes: tensors and plain values, all that
# torch.load(weights_only=True) reads back
ReferenceState = dict[str, object]
FOLDER = "references"  # under the env's cache root, beside the workflows' folders
# notes["reference"]: how this process got its reference
COMPUTED, READ, CACHE_OFF = "computed", "read from cache", "computed, cache off"


class CheckpointFile(StrictModel):
    name: str
    size: int
    mtime_ns: int


class ReferenceKey(StrictModel):
    """Everything eager's reference for a job depends on; a reference stored under another key is never read."""

    model: str
    model_definition: str = Field(description="sha256 of the model's ModelInfo as canonical JSON (a suite's own "
                                              "hf_config included)")
    checkpoint: Optional[str] = Field(description="the checkpoint folder; None: seeded random weights")
    checkpoint_files: tuple[CheckpointFile, ...] = Field(description="the folder's files, sizes and mtimes")
    seed: int
    batch_size: int
    input_len: int
    output_len: int
    precision: Precision
    device: str
    gpu_uuid: Optional[str]
    python: str
    torch: str
    cuda: Optional[str]
    transformers: Optional[str]
    worker_code: str = Field(description="sha256 of the worker's and the schema's source (code_key.py): how the "
                                         "reference is computed")

    @classmethod
    def of(cls, job: JobSpec) -> "ReferenceKey":
        gpu = gpu_info() if job.device == "cuda" else None
        return cls(model=job.model, model_definition=_sha256(json.dumps(job.info.model_dump(mode="json"),
                                                                        sort_keys=True)),
                   checkpoint=job.model_path, checkpoint_files=_checkpoint_files(job.model_path), seed=job.seed,
                   batch_size=job.batch_size, input_len=job.input_len, output_len=job.output_len,
                   precision=job.precision, device=job.device, gpu_uuid=gpu.uuid if gpu else None,
                   python=platform.python_version(), torch=str(torch.__version__), cuda=torch.version.cuda,
                   transformers=package_versions().get("transformers"), worker_code=worker_code())

    def file_name(self) -> str:
        return _sha256(self.model_dump_json())[:32] + ".pt"

    def differences(self, other: "ReferenceKey") -> list[str]:
        return [name for name in type(self).model_fields if getattr(self, name) != getattr(other, name)]


@dataclass(frozen=True)
class ReferenceCache:
    folder: Optional[Path]  # None: off

    @classmethod
    def under(cls, cache_root: Path) -> "ReferenceCache":
        """The cache in the env's cache root, unless REFERENCE_CACHE_ENV is "0"."""
        return cls(None if os.environ.get(REFERENCE_CACHE_ENV) == "0" else cache_root / FOLDER)

    def provide(self, job: JobSpec, compute: Callable[[dict[str, Setting]], ReferenceState],
                notes: dict[str, Setting]) -> ReferenceState:
        """The job's reference: read from its file, else compute(notes of its own) and stored. `notes` gets how
        (notes["reference"]), the seconds it took (reference_s) and the notes compute made, read back with it."""
        begin = time.perf_counter()
        if self.folder is None:
            state = compute(notes)
            notes["reference"] = CACHE_OFF
        else:
            state = _read_or_compute(self.folder, ReferenceKey.of(job), compute, notes)
        notes["reference_s"] = round(time.perf_counter() - begin, 4)
        return state


def _read_or_compute(folder: Path, key: ReferenceKey, compute: Callable[[dict[str, Setting]], ReferenceState],
                     notes: dict[str, Setting]) -> ReferenceState:
    path = folder / key.file_name()
    try:
        state, computed_notes = _read(path, key)
        notes.update(computed_notes)
        notes["reference"] = READ
        return state
    except FileNotFoundError:
        notes["reference"] = COMPUTED
    except _Refused as refused:
        notes["reference"] = f"recomputed: {refused}"
    computed_notes: dict[str, Setting] = {}
    state = compute(computed_notes)
    notes.update(computed_notes)
    try:
        _write(path, key, state, computed_notes)
    except (OSError, RuntimeError) as error:  # torch.save reports a full disk as a RuntimeError
        notes["reference_store_error"] = f"{type(error).__name__}: {error}"[:300]
    return state


class _Refused(Exception):
    """Why a stored reference is not read."""


def _read(path: Path, key: ReferenceKey) -> tuple[ReferenceState, dict[str, Setting]]:
    """The state and compute's notes stored at `path` for `key`; FileNotFoundError where there is none, _Refused where
    the file is not one to read."""
    try:
        stored = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise
    except Exception as error:  # truncated, not torch.save's, or holding what weights_only refuses: all unreadable
        raise _Refused(f"unreadable ({type(error).__name__})") from error
    if not (isinstance(stored, dict) and set(stored) == {"key", "state", "notes"}
            and isinstance(stored["state"], dict) and isinstance(stored["notes"], dict)):
        raise _Refused("not a reference file")
    try:
        stored_key = ReferenceKey.model_validate_json(stored["key"])
    except (ValueError, TypeError) as error:  # pydantic's ValidationError is a ValueError
        raise _Refused("its key is unreadable") from error
    differences = key.differences(stored_key)
    if differences:
        raise _Refused(f"stored for another {', '.join(differences)}")
    return stored["state"], stored["notes"]


def _write(path: Path, key: ReferenceKey, state: ReferenceState, notes: dict[str, Setting]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as file:
            torch.save({"key": key.model_dump_json(), "state": state, "notes": notes}, file)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _checkpoint_files(folder: Optional[str]) -> tuple[CheckpointFile, ...]:
    """The files directly in a checkpoint folder (its config and weights among them), by name; none for random
    weights."""
    if folder is None or not os.path.isdir(folder):
        return ()
    entries = sorted((entry for entry in os.scandir(folder) if entry.is_file()), key=lambda entry: entry.name)
    return tuple(CheckpointFile(name=entry.name, size=entry.stat().st_size, mtime_ns=entry.stat().st_mtime_ns)
                 for entry in entries)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
