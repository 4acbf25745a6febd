"""Reading back what a killed sweep's workers wrote. A sweep stores each process's result as it arrives, but a
SIGKILL can land between a worker's result line and its storing, and a local worker outlives its orchestrator by up to
a second (workers/orphan.py), a container until the next sweep removes it: those lines are in the exchange folders
only. Each sweep folder says what its results belong to (sweep.json) and each work unit which round and places its
jobs had (unit.json); a live sweep holds a lock on its folder. The next sweep (or a requeued Slurm task) takes each
unlocked folder that has no end marker, stores the processes its attempts lack (a process is known by its sweep and
round: a cell runs once per round), and marks the folder ended. A folder belongs to the store its sweep wrote to
(sweep.json names it): a sweep into another store leaves it alone, and `left_for_other_stores` says what it left. A
result that cannot be stored (a value the store refuses) sets its folder aside as failed rather than stopping every
later sweep on it."""

import fcntl
import sys
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Iterator, Optional

from pydantic import BaseModel, ValidationError
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from mlcbench.orchestrator import workdirs
from mlcbench.orchestrator.sweep.cells import CellAttempt, WorkerScope, on_gpu
from mlcbench.orchestrator.planner import is_partial, stored_processes
from mlcbench.orchestrator.errors import UsageError
from mlcbench.orchestrator.store import Store, record
from mlcbench.orchestrator.store.database import sqlite_file
from mlcbench.schema import GpuInfo, Result
from mlcbench.schema.protocol import RESULTS_FILE, read_lines

SWEEP_FILE, UNIT_FILE, LOCK_FILE = "sweep.json", "unit.json", ".lock"
# why a killed sweep's results could not be read back into its store (beside the folder's failure marker)
REFUSED_FILE = "not-stored.txt"


class SweepRecord(BaseModel):
    """What the results in one sweep folder (one sweep, one env) are stored as."""

    sweep_id: str
    env: str
    gpu_tag: str
    config_key: Optional[str]
    order_seed: int
    worker_scope: WorkerScope
    git_rev: Optional[str]
    # a --rerun measures afresh; otherwise a cell short of its processes went on from its stored attempt
    rerun: bool = False
    # the store its results go to (store_identity); None in folders of an mlcbench before stores were named: any
    store: Optional[str] = None


class UnitRecord(BaseModel):
    """One work unit's jobs: the round that ran them, each job's place in that round, the GPU and image it ran on."""

    round: int
    positions: dict[str, int]
    gpu: Optional[GpuInfo] = None
    image_digest: Optional[str] = None


@contextmanager
def claimed(folder: Path, record: SweepRecord) -> Iterator[None]:
    """A live sweep's folder: locked while it runs (a later sweep leaves it alone), described for the one that reads
    it back if this sweep is killed. A requeued Slurm task reuses its folder: an end marker left there is dropped."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / LOCK_FILE, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for marker in (workdirs.ENDED, workdirs.FAILED):
            (folder / marker).unlink(missing_ok=True)
        (folder / SWEEP_FILE).write_text(record.model_dump_json(), encoding="utf-8")
        yield


def describe_unit(folder: Path, unit: UnitRecord) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / UNIT_FILE).write_text(unit.model_dump_json(), encoding="utf-8")


def store_identity(url: str) -> str:
    """One store, whatever URL reaches it: a SQLite file by its resolved path, a server's database by its host, port
    and name (driver and credentials aside)."""
    path = sqlite_file(url)
    if path is not None:
        return f"sqlite:///{path.expanduser().resolve()}"
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):  # not a URL: opening the store refuses it
        return url
    return f"{parsed.get_backend_name()}://{parsed.host or ''}:{parsed.port or ''}/{parsed.database or ''}"


def left_for_other_stores(workdir: Path, store: Store) -> dict[str, list[Path]]:
    """The folders under `workdir` that killed sweeps into other stores left to be read back: each store's."""
    mine, left = store_identity(store.url), {}
    for folder, sweep in _unended(workdir):
        if sweep.store not in (None, mine):
            left.setdefault(sweep.store, []).append(folder)
    return left


def _unended(workdir: Path) -> Iterator[tuple[Path, SweepRecord]]:
    for described in sorted(workdir.glob(f"*/{SWEEP_FILE}")):
        if _ended(described.parent):
            continue
        try:
            yield described.parent, SweepRecord.model_validate_json(described.read_text(encoding="utf-8"))
        except (ValidationError, OSError):
            continue


def recover(workdir: Path, store: Store) -> int:
    """Store what the workers of killed sweeps into this store under `workdir` wrote and no sweep stored; returns how
    many processes (results) that was. A folder whose results the store refuses is marked failed, the reason beside
    it (REFUSED_FILE), and left for the user to read; a folder of another store is left as it is."""
    recovered, mine = 0, store_identity(store.url)
    for described in sorted(workdir.glob(f"*/{SWEEP_FILE}")):
        folder = described.parent
        if _ended(folder):
            continue
        with ExitStack() as stack:
            lock = stack.enter_context(open(folder / LOCK_FILE, "a"))
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # a sweep still running
                continue
            if _ended(folder):  # another sweep read it back meanwhile
                continue
            try:
                sweep = SweepRecord.model_validate_json(described.read_text(encoding="utf-8"))
            except (ValidationError, OSError):
                continue
            if sweep.store not in (None, mine):  # another store's: read back by a sweep into that one
                continue
            try:
                recovered += _recover_folder(folder, sweep, store)
            except UsageError as refused:
                (folder / workdirs.FAILED).write_text(sweep.sweep_id, encoding="utf-8")
                (folder / REFUSED_FILE).write_text(f"{refused}\n", encoding="utf-8")
                print(f"warning: a killed sweep's results in {folder} cannot be stored ({refused}); that folder is set "
                      f"aside (marked failed, why in {REFUSED_FILE}) and this sweep goes on; delete it once read",
                      file=sys.stderr)
                continue
            (folder / workdirs.ENDED).write_text(sweep.sweep_id, encoding="utf-8")
    return recovered


def _ended(folder: Path) -> bool:
    return (folder / workdirs.ENDED).exists() or (folder / workdirs.FAILED).exists()


def _recover_folder(folder: Path, sweep: SweepRecord, store: Store) -> int:
    written: dict[str, list[tuple[UnitRecord, Result]]] = {}
    for described in sorted(folder.glob(f"round-*/unit-*/{UNIT_FILE}")):
        try:
            unit = UnitRecord.model_validate_json(described.read_text(encoding="utf-8"))
        except (ValidationError, OSError):
            continue
        for results in sorted(described.parent.glob(f"worker-*/{RESULTS_FILE}")):
            for line in read_lines(results):
                try:
                    result = Result.model_validate_json(line)
                except ValidationError:
                    continue
                if result.job_id in unit.positions:
                    written.setdefault(result.job_id, []).append((unit, result))
    recovered = 0
    for job_id, lines in written.items():
        attempts = store.attempts(sweep_id=sweep.sweep_id, job_id=job_id, env=sweep.env, gpu_tag=sweep.gpu_tag)
        stored_rounds = {process.round for _, result in attempts for process in stored_processes(result)
                         if process.sweep_id == sweep.sweep_id}
        failure_stored = any(result.status != "ok" or (result.metrics.latency and result.metrics.latency.lost_processes)
                             for _, result in attempts)
        missing = sorted(((unit, result) for unit, result in lines
                          if (unit.round not in stored_rounds if result.status == "ok" else not failure_stored)),
                         key=lambda line: line[0].round)
        if not missing:
            continue
        row, base = attempts[-1] if attempts and attempts[-1][1].status == "ok" else (None, None)
        if row is None and not sweep.rerun:  # the sweep went on from what the cell had, as it still has it
            base = next((result for result in store.cells(job_id=job_id, env=sweep.env, gpu_tag=sweep.gpu_tag)
                         if is_partial(result)), None)
        cell = CellAttempt(missing[0][1].job, sweep.sweep_id, sweep.order_seed, sweep.worker_scope, sweep.git_rev,
                           resumed=base, attempt=row.id if row is not None else None)
        for unit, result in missing:
            attempt = cell.add(on_gpu(result, unit.gpu), unit.round, unit.positions[job_id], unit.image_digest)
            _, cell.attempt = record(store, attempt, sweep.env, sweep.gpu_tag, cell.digest, sweep.sweep_id,
                                     sweep.config_key, cell.attempt)
            recovered += 1
    return recovered
