"""The result store: one SQL table of results, tagged and carrying the whole Result. A *cell* is (job, env, GPU tag);
every attempt at a cell is kept (its history), and the result of a cell is chosen when it is read (`Store.cells`):
its latest `ok` attempt (one with all its processes before one still short of them), else its latest final one
(`unsupported`), else its latest. A crash never hides a good result. A sweep stores a cell's attempt after its first
process and extends it after each next one (`put_attempt`).

Any SQLAlchemy URL works (SQLite by default, PostgreSQL for several hosts). The schema is created and upgraded by
Alembic migrations, never rewritten silently. The orchestrator is the only writer; several orchestrators (threads,
processes, hosts) may write to one store at once."""

import atexit
import errno
import os
import shutil
import sqlite3
import tempfile
import time
import weakref
from contextlib import closing
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, NamedTuple, Optional
from urllib.parse import quote

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import (BigInteger, Boolean, DateTime, Float, Index, Integer, String, Text, create_engine, event,
                        inspect, select, text)
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column
from sqlalchemy.pool import NullPool

from mlcbench.orchestrator.errors import EnvironmentFailure, UsageError
from mlcbench.orchestrator.planner import measured_in_full
from mlcbench.orchestrator.store.redaction import mask, mask_url, remember, url_secrets
from mlcbench.schema import FINAL_STATUSES, Calibration, JobSpec, Result

# the store where --db is not given: MLCBENCH_DB where set (the tests set it), else results/mlcbench.db here
DB_VARIABLE = "MLCBENCH_DB"
DEFAULT_DB = os.environ.get(DB_VARIABLE) or "sqlite:///results/mlcbench.db"
MIGRATIONS = Path(__file__).parent / "migrations"
# any constant: PostgreSQL advisory lock that serializes the migrations of orchestrators starting at once
MIGRATION_LOCK_KEY = 0x6D6C6362
# how long a SQLite writer waits for another's lock before "database is locked"
SQLITE_BUSY_TIMEOUT_MS = 30_000
# execution option: a SQLite transaction that takes the write lock when it begins (see _sqlite_begin)
IMMEDIATE = "mlcbench_sqlite_immediate"


class Base(DeclarativeBase):
    pass


class CalibrationRow(Base):
    """The ceilings a sweep measured on one GPU (schema Calibration)."""

    __tablename__ = "calibrations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    sweep_id: Mapped[Optional[str]] = mapped_column(String(128), index=True)
    env: Mapped[Optional[str]] = mapped_column(String(64))
    gpu_tag: Mapped[Optional[str]] = mapped_column(String(64), index=True)
    gpu_uuid: Mapped[Optional[str]] = mapped_column(String(64))
    measured_at: Mapped[Optional[datetime]] = mapped_column(DateTime(timezone=True))
    calibration_json: Mapped[str] = mapped_column(Text)


class ResultRow(Base):
    __tablename__ = "results"
    __table_args__ = (Index("ix_results_cell", "job_id", "env", "gpu_tag"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[str] = mapped_column(String(32), index=True)
    env: Mapped[str] = mapped_column(String(64), index=True)
    gpu_tag: Mapped[str] = mapped_column(String(64), index=True)
    model: Mapped[str] = mapped_column(String(64))
    workflow: Mapped[str] = mapped_column(String(64))
    precision: Mapped[str] = mapped_column(String(8))
    batch_size: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16))
    reason: Mapped[Optional[str]] = mapped_column(Text)
    median_ms: Mapped[Optional[float]] = mapped_column(Float)
    tokens_per_s: Mapped[Optional[float]] = mapped_column(Float)
    tflops: Mapped[Optional[float]] = mapped_column(Float)
    compile_s: Mapped[Optional[float]] = mapped_column(Float)
    peak_mem_bytes: Mapped[Optional[int]] = mapped_column(BigInteger)
    correct: Mapped[Optional[bool]] = mapped_column(Boolean)
    gpu_uuid: Mapped[Optional[str]] = mapped_column(String(64))
    gpu_index: Mapped[Optional[int]] = mapped_column(Integer)
    image_digest: Mapped[Optional[str]] = mapped_column(String(128))
    git_rev: Mapped[Optional[str]] = mapped_column(String(64))
    started_at: Mapped[Optional[datetime]] = mapped_column(DateTime(timezone=True))
    ended_at: Mapped[Optional[datetime]] = mapped_column(DateTime(timezone=True))
    stored_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    result_json: Mapped[str] = mapped_column(Text)
    sweep_id: Mapped[Optional[str]] = mapped_column(String(128), index=True)

    def result(self) -> Result:
        return Result.model_validate_json(self.result_json)


def _columns(result: Result) -> dict:
    """A result's row; a UsageError where a value is longer than its column holds (PostgreSQL would refuse it only
    at the insert, SQLite never), so that every backend takes the same rows (merge brings in older stores' names)."""
    job, metrics, provenance = result.job, result.metrics, result.provenance
    gpu = provenance.gpu
    columns = dict(
        job_id=result.job_id, env=provenance.env or "?", gpu_tag=provenance.gpu_tag or "?", model=job.model,
        workflow=job.workflow, precision=job.precision, batch_size=job.batch_size, status=result.status,
        reason=result.reason, median_ms=metrics.latency.median_ms if metrics.latency else None,
        tokens_per_s=metrics.tokens_per_s, tflops=metrics.tflops, compile_s=metrics.compile_s,
        peak_mem_bytes=metrics.peak_mem_bytes,
        correct=result.correctness.passed if result.correctness else None,
        gpu_uuid=gpu.uuid if gpu else None, gpu_index=gpu.index if gpu else None,
        image_digest=provenance.image_digest, git_rev=provenance.git_rev, started_at=provenance.started_at,
        ended_at=provenance.ended_at, stored_at=datetime.now(timezone.utc), result_json=result.model_dump_json(),
    )
    for name, value in columns.items():
        limit = getattr(ResultRow.__table__.c[name].type, "length", None)
        if isinstance(value, str) and limit is not None and len(value) > limit:
            raise UsageError(f"cannot store {value[:limit]!r}... as a result's {name}: {len(value)} characters, more "
                             f"than the store's {limit}; nothing was stored")
    return columns


Filter = Optional[Iterable[str] | str]
# what Store.check_writable writes, and takes back
_PROBE_JOB = JobSpec(model="matmul-small", workflow="eager", precision="fp32", batch_size=1, device="cpu")


def _calibration_row(calibration: Calibration) -> CalibrationRow:
    return CalibrationRow(sweep_id=calibration.sweep_id, env=calibration.env, gpu_tag=calibration.gpu_tag,
                          gpu_uuid=calibration.gpu.uuid if calibration.gpu else None,
                          measured_at=calibration.measured_at, calibration_json=calibration.model_dump_json())


class Store:
    def __init__(self, url: str = DEFAULT_DB, create: bool = True, *, pooled: bool = True):
        """create=False (commands that only read): no store is created where there is none, a store that cannot
        be written is read as it is, and none is written (one of an older schema is read through a migrated copy).
        pooled=False: a connection per transaction, closed after it, so that hundreds of processes writing now and
        then (Slurm array tasks) do not each hold a server connection open between their writes."""
        self.url = url
        self.safe_url = safe_url(url)
        # the URL's credentials, masked in whatever the store is handed to keep and in every error printed
        self.secrets = url_secrets(url)
        remember(self.secrets)
        self.engine, self.read_only, self.warning = open_engine(url, create, pooled)
        _OPEN_ENGINES.add(self.engine)
        try:
            if create:
                migrate(self.engine)
            else:
                self.engine = at_this_schema(self.engine, url)
                _OPEN_ENGINES.add(self.engine)
        except DBAPIError as error:
            raise EnvironmentFailure(f"cannot bring the result store {self.safe_url} to this mlcbench's schema: "
                                     f"{failure(error, url)}; run the command again") from None
        # transactions that write take SQLite's write lock when they begin (waiting for it): one that read first (an
        # attempt read back to be extended) could not wait for another writer later and would fail "database is locked"
        self.writer = self.engine.execution_options(**{IMMEDIATE: True})
        # row id -> why its stored result could not be read: rows the reads so far skipped
        self.unreadable: dict[int, str] = {}

    def check_writable(self) -> None:
        """An EnvironmentFailure unless a result and a calibration could be written now (a read-only user, a full
        disk, a lock that never ends): found out before any job runs, then rolled back."""
        probe = Result.without_run(_PROBE_JOB, "unsupported", "write probe, rolled back")
        try:
            with Session(self.writer) as session, session.begin():
                session.add(ResultRow(**_columns(probe)))
                session.add(CalibrationRow(calibration_json="{}"))
                session.flush()
                session.rollback()
        except DBAPIError as error:
            raise EnvironmentFailure(write_failure(error, self.url, "nothing was run; mend it (a user without INSERT "
                                                                    "rights, a full disk) or choose another --db")) \
                from None

    def put(self, result: Result, sweep_id: Optional[str] = None) -> None:
        """Add one attempt at its cell; the cell's earlier attempts stay."""
        self.put_all([(result, sweep_id)])

    def put_all(self, attempts: Iterable[tuple[Result, Optional[str]]],
                calibrations: Iterable[Calibration] = ()) -> None:
        """Add attempts (result, sweep id), and measured ceilings, in one transaction: all of them or, on any failure,
        none."""
        try:
            with Session(self.writer) as session, session.begin():
                session.add_all(ResultRow(**_columns(result), sweep_id=sweep_id) for result, sweep_id in attempts)
                session.add_all(_calibration_row(calibration) for calibration in calibrations)
        except DBAPIError as error:
            raise EnvironmentFailure(write_failure(error, self.url, KEPT)) from None

    def put_attempt(self, result: Result, sweep_id: Optional[str] = None, row_id: Optional[int] = None) -> int:
        """Store an attempt that may grow: a new one (row_id None), or the attempt of row `row_id` replaced by this
        longer one (a cell's processes are stored one by one as they finish); returns its row id."""
        try:
            with Session(self.writer) as session, session.begin():
                row = session.get(ResultRow, row_id) if row_id is not None else None
                if row is None:
                    row = ResultRow(**_columns(result), sweep_id=sweep_id)
                    session.add(row)
                else:
                    for name, value in _columns(result).items():
                        setattr(row, name, value)
                session.flush()
                return row.id
        except DBAPIError as error:
            raise EnvironmentFailure(write_failure(error, self.url, KEPT)) from None

    def put_calibration(self, calibration: Calibration) -> None:
        with Session(self.writer) as session, session.begin():
            session.add(_calibration_row(calibration))

    def calibrations(self, gpu_tags: Filter = None) -> list[Calibration]:
        """The measured ceilings of every sweep (on these GPU tags), oldest first; one that does not read (a newer
        mlcbench's), or a read-only store made before they were kept, gives none: a report then reads its figures
        against the spec alone."""
        query = select(CalibrationRow).order_by(CalibrationRow.id)
        if gpu_tags is not None:
            query = query.where(CalibrationRow.gpu_tag.in_([gpu_tags] if isinstance(gpu_tags, str) else list(gpu_tags)))
        found = []
        with Session(self.engine) as session:
            try:
                rows = list(session.scalars(query))
            except DBAPIError:  # no such table: a read-only store that could not be migrated
                return []
            for row in rows:
                try:
                    found.append(Calibration.model_validate_json(row.calibration_json))
                except ValueError:
                    continue
        return found

    def cells(self, status: Filter = None, **filters: Filter) -> list[Result]:
        """The result of each cell whose attempts match the column filters: its latest `ok` attempt, else its latest
        final one, else its latest. `status` selects cells by that result, not attempts."""
        chosen: dict[tuple[str, str, str], tuple[tuple, Result]] = {}
        for row, result in self.attempts(**filters):
            key, rank = (row.job_id, row.env, row.gpu_tag), _preference(row, result)
            if key not in chosen or rank > chosen[key][0]:
                chosen[key] = (rank, result)
        statuses = None if status is None else {status} if isinstance(status, str) else set(status)
        return [result for _, result in chosen.values() if statuses is None or result.status in statuses]

    def history(self, **filters: Filter) -> list[Result]:
        """Every readable attempt matching the column filters, in the order they were stored within each cell."""
        return [result for _, result in self.attempts(**filters)]

    def latest(self, limit: Optional[int], **filters: Filter) -> list[Result]:
        """The `limit` readable attempts stored last (every one when None) matching the column filters, oldest first;
        only those rows are read (a store holds tens of thousands)."""
        query = self._filtered(select(ResultRow).order_by(ResultRow.id.desc()), filters)
        rows = self._read(query if limit is None else query.limit(limit))
        return [result for _, result in self.attempts(rows=reversed(rows))]

    def attempts(self, rows: Optional[Iterable[ResultRow]] = None,
                 **filters: Filter) -> list[tuple[ResultRow, Result]]:
        """Rows (those given, else those the filters select) with their results; a row whose result cannot be read is
        skipped and noted in `unreadable`."""
        readable = []
        for row in self.rows(**filters) if rows is None else rows:
            try:
                readable.append((row, row.result()))
            except ValueError as error:
                self.unreadable[row.id] = str(error).strip().splitlines()[0]
        return readable

    def rows(self, **filters: Filter) -> list[ResultRow]:
        """Every attempt matching every given column filter (a value or a collection of values), oldest first within
        each cell."""
        return self._read(self._filtered(select(ResultRow).order_by(
            ResultRow.gpu_tag, ResultRow.env, ResultRow.model, ResultRow.workflow, ResultRow.batch_size, ResultRow.id),
            filters))

    @staticmethod
    def _filtered(query, filters: dict[str, Filter]):
        for name, value in filters.items():
            if value is None:
                continue
            column = getattr(ResultRow, name)
            query = query.where(column == value if isinstance(value, (str, int)) else column.in_(list(value)))
        return query

    def _read(self, query) -> list[ResultRow]:
        try:
            with Session(self.engine) as session:
                return list(session.scalars(query))
        except DBAPIError as error:
            raise EnvironmentFailure(f"cannot read the result store {self.safe_url}: {failure(error, self.url)}") \
                from None


def _preference(row: ResultRow, result: Result) -> tuple:
    """Which attempt is the result of its cell: ok over final over anything, then one with all its processes over one
    still short of them (a sweep stopped or killed half-way through it), then the latest (by when it ended)."""
    moment = result.provenance.ended_at or result.provenance.started_at or row.stored_at
    if moment.tzinfo is None:  # SQLite hands datetimes back without their zone; they were stored in UTC
        moment = moment.replace(tzinfo=timezone.utc)
    return (result.status == "ok", result.status in FINAL_STATUSES, measured_in_full(result), moment, row.id)


def sqlite_file(url: str) -> Optional[Path]:
    """The file of a SQLite URL (None for other databases and in-memory SQLite)."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        return None
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


# every engine opened here, closed at exit: a command ends without CPython's finalization (orchestrator/__main__.py),
# and a SQLite connection left open keeps its -wal and -shm files beside the store
_OPEN_ENGINES: "weakref.WeakSet[Engine]" = weakref.WeakSet()


@atexit.register
def _close_open_engines() -> None:
    for engine in list(_OPEN_ENGINES):
        engine.dispose()


class OpenedStore(NamedTuple):
    engine: Engine
    read_only: bool
    # what a reader should know of it (a write-ahead log that could not be read), None when nothing
    warning: Optional[str] = None


def open_engine(url: str, create: bool = True, pooled: bool = True) -> OpenedStore:
    """An engine whose database answers, and whether it is read-only; any failure is a UsageError that names the URL.
    create=False: a SQLite file must exist already, and one that cannot be written (a read-only or immutable file, a
    read-only filesystem) is opened read-only. pooled=False: no connection pool (see Store)."""
    _refuse_unencoded_at(url)
    path = sqlite_file(url)
    read_only = False
    if path is not None:
        if not create and not path.is_file():
            raise UsageError(f"no result store at {path}: a sweep creates one; check --db")
        if create:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                reason = f"cannot create the result store {path}: {error.strerror} ({error.filename})"
                if error.errno in MACHINE_ERRNOS:
                    raise EnvironmentFailure(f"{reason}; free space, then run the same command again") from None
                raise UsageError(f"{reason}; choose another --db") from None
        read_only = path.is_file() and not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK))
        if read_only and create:  # the machine's state, as the README's table of exit codes has it (1)
            raise EnvironmentFailure(f"the result store {path} cannot be written (a read-only file or filesystem); "
                                     f"make it writable or choose another --db")
    if path is not None and path.is_file() and path.stat().st_size > 0:
        _refuse_another_programs_sqlite(path, url)
    if read_only:
        opened = _read_only_sqlite(path)  # type: ignore[arg-type]
        with opened.engine.connect() as connection:
            _refuse_unless_a_store(connection, url)
        return opened
    try:
        engine = create_engine(url) if pooled else create_engine(url, poolclass=NullPool)
    except ArgumentError:
        raise UsageError(f"cannot use --db {safe_url(url)}: not a SQLAlchemy URL "
                         f"(e.g. sqlite:///results/mlcbench.db, postgresql+psycopg://user:password@host/db)") from None
    except ImportError as error:
        driver = f"psycopg, which mlcbench's postgres extra installs: pip install '{POSTGRES_EXTRA}'" \
            if error.name == "psycopg" else f"{error.name or 'its driver'}; with mlcbench's postgres extra (pip " \
            f"install '{POSTGRES_EXTRA}'), write the URL postgresql+psycopg://USER:PASSWORD@HOST/DB"
        raise UsageError(f"cannot use --db {safe_url(url)}: its database driver is not installed: {driver}") \
            from None
    except ValueError as error:
        raise UsageError(f"cannot use --db {safe_url(url)}: {mask(str(error), url_secrets(url))}") from None
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas if create else _sqlite_reading_pragmas)
        event.listen(engine, "begin", _sqlite_begin)
    try:
        with engine.connect() as connection:
            if not create:
                _refuse_unless_a_store(connection, url)
    except UsageError:
        engine.dispose()
        raise
    except DBAPIError as error:
        diagnosis = diagnose(error, engine.dialect.name, path)
        raise diagnosis.kind(f"cannot open the result store {safe_url(url)}: {failure(error, url)}; "
                             f"{diagnosis.advice}") from None
    return OpenedStore(engine, read_only=False)


def _refuse_unless_a_store(connection: Connection, url: str) -> None:
    """A UsageError unless the database holds mlcbench's tables: a command that only reads never creates them in an
    empty database or another program's."""
    if "alembic_version" not in inspect(connection).get_table_names():
        raise UsageError(f"{safe_url(url)} is not an mlcbench result store (an empty database, or another program's: "
                         f"it has no alembic_version table); check --db (a sweep creates a store)")


def _refuse_another_programs_sqlite(path: Path, url: str) -> None:
    """A UsageError where a SQLite file holds tables but not mlcbench's (every store has its alembic_version table),
    so that another program's database is refused before anything is written to it (no table added, its journal mode
    not switched). Its file alone is read, as immutable: a read-only connection would leave a write-ahead log and its
    index beside a store. A file that does not read so is left to the opening that follows, which says why."""
    try:
        with closing(sqlite3.connect(f"file:{quote(str(path))}?immutable=1", uri=True)) as connection:
            tables = {name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.Error:
        return
    if tables and "alembic_version" not in tables:
        raise UsageError(f"{safe_url(url)} is not an mlcbench result store: another program's SQLite database "
                         f"({len(tables)} table(s), no alembic_version); nothing was written to it; choose another "
                         f"--db (a sweep creates a store in a new file)")


def _read_only_sqlite(path: Path) -> OpenedStore:
    """A SQLite file that cannot be written, read as it is. Rows still in its write-ahead log (a writer that was killed,
    or still runs) are read through SQLite's read-only mode, which needs the log's index (-shm) to be there or
    creatable; where it cannot be, the file is read as immutable, without the log, and the warning says so."""
    uri = f"file:{quote(str(path))}"
    log = path.with_name(f"{path.name}-wal")
    warning = None
    if log.is_file() and log.stat().st_size > 0:
        engine = create_engine("sqlite://", creator=lambda: sqlite3.connect(f"{uri}?mode=ro", uri=True))
        try:
            with engine.connect() as connection:
                connection.exec_driver_sql("SELECT count(*) FROM sqlite_master")
            return OpenedStore(engine, read_only=True)
        except DBAPIError as error:
            engine.dispose()
            warning = (f"the result store {path} is read-only and its write-ahead log {log.name} cannot be read "
                       f"({failure(error, str(path))}): rows written since its last checkpoint are not shown; open "
                       f"it once where it can be written (any mlcbench command) to fold them in")
    engine = create_engine("sqlite://", creator=lambda: sqlite3.connect(f"{uri}?immutable=1", uri=True))
    try:
        with engine.connect() as connection:
            connection.exec_driver_sql("SELECT count(*) FROM sqlite_master")
    except DBAPIError as error:
        raise UsageError(f"cannot open the result store {path}: {failure(error, str(path))}; check --db") from None
    return OpenedStore(engine, read_only=True, warning=warning)


# the install that brings the PostgreSQL driver (pyproject.toml's extras)
POSTGRES_EXTRA = "mlcbench[postgres]"
# what an OSError says when the machine failed (a full disk or quota, an I/O error), not the path the user gave
MACHINE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO})
# SQLite's primary result codes (an extended code carries one in its low byte)
_SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_NOMEM, _SQLITE_IOERR, _SQLITE_FULL = 5, 6, 7, 10, 13
# SQLSTATE classes of a server that answered and refused what it was asked
_BAD_LOGIN, _NO_SUCH_DATABASE = "28", "3D"
# what libpq says where a refused connection carries no SQLSTATE (psycopg raises it before a session exists)
_BAD_LOGIN_WORDS = ("password authentication failed", "no password supplied", 'role "', "authentication failed")
_NO_SUCH_DATABASE_WORDS = ("does not exist",)
RETRY = "then run the same command again"
# what a failed write leaves, and what to do where no cause is known
KEPT = "what was stored before is kept, run the same command again once it is mended"


@dataclass(frozen=True)
class Diagnosis:
    """Whose the failure to open a store is (a UsageError: the user's --db; an EnvironmentFailure: the machine's),
    and what to do about it."""

    kind: type[Exception]
    advice: str


def diagnose(error: DBAPIError, dialect: str, path: Optional[Path] = None) -> Diagnosis:
    """Why a database refused to open, from SQLite's result code (`path`: its file) or the server's SQLSTATE
    (libpq's message where a refused connection has none)."""
    if dialect == "sqlite":
        code = (getattr(error.orig, "sqlite_errorcode", None) or 0) & 0xFF
        if code == _SQLITE_FULL:
            return Diagnosis(EnvironmentFailure, full_advice(path))
        if code in (_SQLITE_IOERR, _SQLITE_NOMEM):
            return Diagnosis(EnvironmentFailure, f"the machine failed reading or writing it: mend the disk or free "
                                                 f"memory, {RETRY}")
        if code in (_SQLITE_BUSY, _SQLITE_LOCKED):
            return Diagnosis(EnvironmentFailure, locked_advice(path))
        return Diagnosis(UsageError, "check --db")
    sqlstate = getattr(error.orig, "sqlstate", None) or ""
    said = str(error.orig)
    if sqlstate.startswith(_NO_SUCH_DATABASE) or (not sqlstate and "database" in said
                                                   and any(words in said for words in _NO_SUCH_DATABASE_WORDS)):
        return Diagnosis(UsageError, "no such database on that server: check the database name in --db, or create "
                                     "it (createdb NAME)")
    if sqlstate.startswith(_BAD_LOGIN) or (not sqlstate and any(words in said for words in _BAD_LOGIN_WORDS)):
        return Diagnosis(UsageError, "the server refused the login: check the user name and password in --db")
    if sqlstate:
        return Diagnosis(EnvironmentFailure, f"the database server answered but could not serve it: mend it, {RETRY}")
    return Diagnosis(EnvironmentFailure, f"start the database server or mend the network, {RETRY}")


def write_failure(error: DBAPIError, url: str, otherwise: str) -> str:
    """Why a write to the store failed, and what to do: for a SQLite file that stayed locked or whose disk is full,
    said with its path; else `otherwise`."""
    reason = f"cannot write to the result store {safe_url(url)}: {failure(error, url)}"
    code = (getattr(error.orig, "sqlite_errorcode", None) or 0) & 0xFF
    path = sqlite_file(url)
    if path is not None and code in (_SQLITE_BUSY, _SQLITE_LOCKED):
        return f"{reason}; {locked_advice(path)}"
    if path is not None and code == _SQLITE_FULL:
        return f"{reason}; {full_advice(path)}"
    return f"{reason}; {otherwise}"


def full_advice(path: Optional[Path]) -> str:
    where = f"the disk that holds {path.absolute().parent}" if path is not None else "the disk that holds it"
    return f"{where} is full: free space there, {RETRY}"


def locked_advice(path: Optional[Path]) -> str:
    """What keeps a SQLite file locked past the busy timeout, likeliest first, for the file at `path`."""
    file = path.absolute() if path is not None else "the file"
    network = _network_filesystem(path.absolute().parent) if path is not None else None
    if network:
        return (f"{file} is on a {network} filesystem, whose locks SQLite cannot rely on: put the store on a local "
                f"disk (--db), or use PostgreSQL for stores shared between hosts")
    return (f"another process held {file} locked for over {SQLITE_BUSY_TIMEOUT_MS / 1000:g} s: another mlcbench "
            f"sweep or merge writing to it, or a program holding it open in a transaction (sqlite3, a database "
            f"browser); end that program, or give this sweep a store of its own (--db; mlcbench merge folds stores "
            f"together), {RETRY}")


def _network_filesystem(folder: Path) -> Optional[str]:
    """The type of the network filesystem that holds `folder` (nfs, cifs ...), None for a local one."""
    try:
        mounts = [line.split()[1:3] for line in Path("/proc/self/mounts").read_text().splitlines()]
    except OSError:
        return None
    holding = [(point, kind) for point, kind in mounts if folder == Path(point) or Path(point) in folder.parents]
    if not holding:
        return None
    kind = max(holding, key=lambda mount: len(mount[0]))[1]
    return kind if kind.startswith(("nfs", "cifs", "smb", "9p", "fuse.sshfs", "lustre", "gpfs", "ceph")) else None


def _refuse_unencoded_at(url: str) -> None:
    """A password holding an unencoded '@' would be cut there and its tail taken for the host (and shown as one)."""
    try:
        host = make_url(url).host
    except (ArgumentError, ValueError):
        return
    if host and "@" in host:
        raise UsageError(f"cannot use --db {safe_url(url)}: its password holds an '@'; write it as %40")


def failure(error: DBAPIError, url: str) -> str:
    """The database's own one-line reason (not SQLAlchemy's, which quotes the statement and its parameters), with the
    URL's credentials masked."""
    reason = str(error.orig).strip().splitlines()[0] if error.orig is not None else type(error).__name__
    return mask(reason, url_secrets(url))


def _sqlite_reading_pragmas(connection, _record) -> None:
    """A command that only reads: the file's journal mode stays as it is (a store is WAL already; another program's
    database is not switched)."""
    connection.isolation_level = None
    cursor = connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.close()


def _sqlite_pragmas(connection, _record) -> None:
    # the driver would commit before each CREATE/ALTER on its own: a migration killed half-way would leave a store
    # that no later migration can take up. Without its transaction handling, _sqlite_begin makes DDL transactional.
    connection.isolation_level = None
    cursor = connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    _switch_to_wal(cursor)
    cursor.close()


def _switch_to_wal(cursor) -> None:
    """PRAGMA journal_mode=WAL, tried again until the busy timeout: where other processes open the same fresh file at
    once, SQLite answers 'database is locked' at once instead of waiting (its busy handler is not called there; 7 of
    360 such opens failed)."""
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as error:
            busy = (getattr(error, "sqlite_errorcode", 0) or 0) & 0xFF == _SQLITE_BUSY
            if not busy or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _sqlite_begin(connection) -> None:
    # IMMEDIATE takes the write lock at BEGIN, waiting for it (busy_timeout): a deferred transaction that read first
    # and writes later cannot wait, as its snapshot would be stale, and fails at once with "database is locked"
    immediate = connection.get_execution_options().get(IMMEDIATE, False)
    connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def safe_url(url: str) -> str:
    """The URL for messages, stores and reports, its credentials masked."""
    return mask_url(url)


def _alembic_config(connection) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


def _refuse_unknown(current: Optional[str], scripts: ScriptDirectory) -> None:
    if current is not None and current not in {script.revision for script in scripts.walk_revisions()}:
        raise UsageError(f"the result store is at schema revision {current}, unknown to this mlcbench "
                         f"(made by a newer version?); upgrade mlcbench")


def at_this_schema(engine: Engine, url: str) -> Engine:
    """An engine that reads the store at this mlcbench's schema without writing to it (a command that only reads): the
    store's own where it is at the newest revision; an older SQLite store's migrated copy in a temporary folder
    (removed at exit); an older server's store is refused with the command that upgrades it."""
    with engine.connect() as connection:
        scripts = ScriptDirectory.from_config(_alembic_config(connection))
        current = MigrationContext.configure(connection).get_current_revision()
    head = scripts.get_current_head()
    if current == head:
        return engine
    _refuse_unknown(current, scripts)
    path = sqlite_file(url)
    if path is None:
        engine.dispose()
        raise UsageError(f"the result store {safe_url(url)} is at schema revision {current}, older than this "
                         f"mlcbench's {head}, and a command that only reads does not upgrade it: upgrade it with "
                         f"`mlcbench merge --into URL` (a merge of no store only upgrades its target)")
    scratch = Path(tempfile.mkdtemp(prefix="mlcbench-read-"))
    atexit.register(shutil.rmtree, scratch, True)
    copy = scratch / path.name
    with engine.connect() as connection, closing(sqlite3.connect(copy)) as target:
        connection.connection.driver_connection.backup(target)
    engine.dispose()
    copied = create_engine(URL.create("sqlite", database=str(copy)))
    event.listen(copied, "connect", _sqlite_pragmas)
    event.listen(copied, "begin", _sqlite_begin)
    migrate(copied)
    return copied


def migrate(engine: Engine) -> None:
    """Bring the store's schema to the newest migration; refuse a store made by a newer mlcbench. A store already at
    the newest is only read, without the lock: hundreds of Slurm array tasks open it at once."""
    with engine.connect() as connection:
        head = ScriptDirectory.from_config(_alembic_config(connection)).get_current_head()
        if MigrationContext.configure(connection).get_current_revision() == head:
            return
    with engine.connect().execution_options(**{IMMEDIATE: True}) as connection, connection.begin():
        if connection.dialect.name == "postgresql":  # released at commit; on SQLite, BEGIN IMMEDIATE is the lock
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
        config = _alembic_config(connection)
        _refuse_unknown(MigrationContext.configure(connection).get_current_revision(),
                        ScriptDirectory.from_config(config))
        command.upgrade(config, "head")
