"""What a new user and a hostile tester hit (issue 64), through the real `mlcbench` command: a killed sweep's leftovers
are read back into their own store only (per-store default work folders; another store leaves them alone and says
so); environment-supplied values are checked before any work and a record that cannot be stored never poisons the
work folder; contradictory Hugging Face configs are refused with the field named; GPU-only options are refused on a
CPU before any worker starts; a locked store and a full disk are named with their path and likely cause."""

import errno
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy.exc import OperationalError
from typer.testing import CliRunner

from mlcbench.orchestrator import sweep as sweeping
from mlcbench.orchestrator.cli import app
from mlcbench.orchestrator.errors import ExitCode
from mlcbench.orchestrator.store import Store, database
from mlcbench.orchestrator.sweep.recovery import REFUSED_FILE, SWEEP_FILE

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]
ONE_CELL = ["--suite", "tiny", "--model", "matmul-small", "--workflow", "eager"]
TINY_LLAMA = json.loads((REPO / "benchmarks/suites/configs/llama3-tiny/config.json").read_text())


def mlcbench(*words: str, cwd: Path, env: dict | None = None, check: bool = False) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "mlcbench.orchestrator", *words], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env={**os.environ, **(env or {})})
    assert not check or done.returncode == 0, done.stdout + done.stderr
    return done


def killed_sweep(db: Path, cwd: Path, *words: str) -> Path:
    """A sweep SIGKILLed as soon as a worker has written a result; the folder it left (sweep.json and results)."""
    sweep = subprocess.Popen([sys.executable, "-m", "mlcbench.orchestrator", "sweep", *ONE_CELL, "--batch-size", "1",
                              "--db", f"sqlite:///{db}", *words], cwd=cwd, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not any(path.stat().st_size for path in cwd.rglob("results.jsonl")):
        assert sweep.poll() is None and time.monotonic() < deadline, "the sweep ended before a result was written"
        time.sleep(0.05)
    sweep.send_signal(signal.SIGKILL)
    sweep.wait()
    [described] = [path for path in cwd.rglob(SWEEP_FILE)]
    return described.parent


def sweep_ids(db: Path) -> set[str]:
    if not db.exists():
        return set()
    return {process.sweep_id for _, result in Store(f"sqlite:///{db}").attempts()
            for process in (result.metrics.latency.processes if result.metrics.latency else [])}


def test_a_killed_sweeps_results_are_read_back_into_its_own_store_only(tmp_path):
    folder = killed_sweep(tmp_path / "x.db", tmp_path, "--rounds", "3")
    killed = json.loads((folder / SWEEP_FILE).read_text())["sweep_id"]
    x_workdir = folder.parent
    assert x_workdir.parent == tmp_path / "results" / "work"  # the default: a folder of the store's own

    # another store's sweep with its own default work folder never sees them
    mine = mlcbench("sweep", *ONE_CELL, "--batch-size", "2", "--rounds", "1", "--db", f"sqlite:///{tmp_path / 'y.db'}",
                    cwd=tmp_path, check=True)
    assert "killed sweep" not in mine.stdout + mine.stderr
    # y's own default folder, emptied by its success, is gone; x's is untouched
    assert list((tmp_path / "results" / "work").iterdir()) == [x_workdir]
    assert folder.is_dir() and not (folder / ".ended").exists()

    # nor when it is pointed at the same work folder: it leaves them alone and says whose they are
    shared = mlcbench("sweep", *ONE_CELL, "--batch-size", "2", "--rounds", "1", "--db", f"sqlite:///{tmp_path / 'y.db'}",
                      "--workdir", str(x_workdir), cwd=tmp_path, check=True)
    assert f"holds results of killed sweeps into another store (sqlite:///{(tmp_path / 'x.db').resolve()}" \
        in shared.stderr
    assert "read back" not in shared.stdout
    assert killed not in sweep_ids(tmp_path / "y.db")
    assert folder.is_dir() and not (folder / ".ended").exists()

    # its own store reads them back
    mlcbench("sweep", *ONE_CELL, "--batch-size", "1", "--rounds", "1", "--db", f"sqlite:///{tmp_path / 'x.db'}",
             cwd=tmp_path, check=True)
    assert killed in sweep_ids(tmp_path / "x.db")
    assert killed not in sweep_ids(tmp_path / "y.db")


@pytest.mark.parametrize("revision", ["x" * 5000, "abc\ndef", "abc\x1b[31mred"])
def test_a_junk_git_revision_in_the_environment_is_refused_before_any_work(tmp_path, revision):
    done = mlcbench("sweep", *ONE_CELL, "--batch-size", "1", "--db", f"sqlite:///{tmp_path / 's.db'}",
                    "--workdir", str(tmp_path / "w"), cwd=tmp_path, env={"MLCBENCH_GIT_REV": revision})
    assert done.returncode == ExitCode.USAGE, done.stdout + done.stderr
    assert done.stderr.startswith("error: MLCBENCH_GIT_REV ") and "Traceback" not in done.stderr
    assert not (tmp_path / "s.db").exists() and not (tmp_path / "w").exists()


def test_a_killed_sweeps_result_that_cannot_be_stored_is_set_aside_not_a_poison(tmp_path):
    db = tmp_path / "s.db"
    folder = killed_sweep(db, tmp_path, "--workdir", str(tmp_path / "w"), "--rounds", "3")
    described = json.loads((folder / SWEEP_FILE).read_text())
    (folder / SWEEP_FILE).write_text(json.dumps({**described, "git_rev": "x" * 5000}))  # what a store refuses
    with sqlite3.connect(db) as store:  # the kill may land after the result was stored: it was not, here
        store.execute("DELETE FROM results")
    again = ["sweep", *ONE_CELL, "--batch-size", "2", "--rounds", "1", "--db", f"sqlite:///{db}",
             "--workdir", str(tmp_path / "w")]

    first = mlcbench(*again, cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    assert f"warning: a killed sweep's results in {folder} cannot be stored" in first.stderr
    assert "delete it once read" in first.stderr and "git_rev" in (folder / REFUSED_FILE).read_text()
    second = mlcbench(*again, cwd=tmp_path)
    assert second.returncode == 0 and "cannot be stored" not in second.stderr, second.stderr


def own_model(tmp_path: Path, **changes) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**TINY_LLAMA, **changes}))
    return folder


@pytest.mark.parametrize("changes, field", [
    ({"num_key_value_heads": 3}, "num_key_value_heads 3 does not divide num_attention_heads 4"),
    ({"vocab_size": 0}, "vocab_size is 0"),
    ({"rope_scaling": {"rope_type": "warp", "factor": 2.0}}, "rope_scaling.rope_type 'warp'"),
    ({"rope_scaling": {"type": "linear", "factor": -2.0}}, "rope_scaling.factor is -2.0"),
    ({"num_attention_heads": 5, "num_key_value_heads": 5, "head_dim": None},
     "num_attention_heads 5 does not divide hidden_size 64"),
])
@pytest.mark.parametrize("plan", [True, False])
def test_a_contradictory_config_is_refused_naming_the_field(tmp_path, changes, field, plan):
    model = own_model(tmp_path, **changes)
    done = runner.invoke(app, ["sweep", "--model", str(model), "--workflow", "eager", "--batch-size", "1",
                               "--gpu", "cpu", "--db", f"sqlite:///{tmp_path / 's.db'}",
                               "--workdir", str(tmp_path / "w"), *(["--plan"] if plan else [])])
    assert done.exit_code == ExitCode.USAGE, done.output
    assert done.stderr.startswith("error: ") and field in done.stderr, done.stderr
    assert not (tmp_path / "s.db").exists() and not (tmp_path / "w").exists()


def test_lengths_beyond_the_configs_positions_are_refused_naming_the_field(tmp_path):
    done = runner.invoke(app, ["sweep", "--model", str(own_model(tmp_path)), "--workflow", "eager", "--batch-size",
                               "1", "--input-len", "300", "--gpu", "cpu", "--plan"])
    assert done.exit_code == ExitCode.USAGE and "max_position_embeddings" in done.stderr, done.output


@pytest.mark.parametrize("workflow, option", [("torch_compile_decode", "pdl"), ("torch_compile_decode", "prefill_graph"),
                                              ("handtuned_decode", "triton_gemv")])
def test_a_gpu_only_option_is_refused_on_a_cpu_before_any_worker_starts(tmp_path, workflow, option):
    done = runner.invoke(app, ["sweep", "--model", "llama-2layer", "--workflow", workflow, "--option",
                               f"{option}=true", "--batch-size", "1", "--gpu", "cpu",
                               "--db", f"sqlite:///{tmp_path / 's.db'}", "--workdir", str(tmp_path / "w")])
    assert done.exit_code == ExitCode.USAGE, done.output
    assert done.stderr.startswith(f"error: {workflow} with {option}=true runs on a CUDA GPU only")
    assert not (tmp_path / "s.db").exists() and not (tmp_path / "w").exists()
    planned = runner.invoke(app, ["sweep", "--model", "llama-2layer", "--workflow", workflow, "--option",
                                  f"{option}=true", "--batch-size", "1", "--gpu", "cpu", "--plan"])
    assert planned.exit_code == 0 and "a sweep on this machine refuses it" in planned.stderr, planned.output


def test_a_store_locked_past_the_timeout_names_the_file_and_the_likely_holders(tmp_path, monkeypatch):
    path = tmp_path / "s.db"
    Store(f"sqlite:///{path}").engine.dispose()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    monkeypatch.setattr(database, "SQLITE_BUSY_TIMEOUT_MS", 200)
    try:
        done = runner.invoke(app, ["sweep", *ONE_CELL, "--batch-size", "1", "--db", f"sqlite:///{path}",
                                   "--workdir", str(tmp_path / "w")])
    finally:
        holder.close()
    assert done.exit_code == ExitCode.ENVIRONMENT, done.output
    assert f"another process held {path} locked for over 0.2 s: another mlcbench sweep" in done.stderr
    assert "a full disk" not in done.stderr


def test_a_full_disk_while_sweeping_names_the_places_written_and_their_space(tmp_path, monkeypatch):
    def disk_full(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(sweeping, "run", disk_full)
    done = runner.invoke(app, ["sweep", *ONE_CELL, "--batch-size", "1", "--db", f"sqlite:///{tmp_path / 's.db'}",
                               "--workdir", str(tmp_path / "w"), "--cache-dir", str(tmp_path / "c")])
    assert done.exit_code == ExitCode.ENVIRONMENT, done.output
    assert done.stderr.startswith("error: No space left on device (--workdir ")
    for place in (f"--workdir {tmp_path / 'w'}: ", f"--cache-dir {tmp_path / 'c'}: ", f"--db {tmp_path / 's.db'}: "):
        assert place in done.stderr, done.stderr


def test_a_full_disk_under_a_sqlite_store_names_its_folder(tmp_path):
    connection = sqlite3.connect(tmp_path / "s.db")
    connection.execute("CREATE TABLE t (x BLOB)")
    connection.execute("PRAGMA max_page_count=2")
    with pytest.raises(sqlite3.DatabaseError) as full:
        connection.execute("INSERT INTO t VALUES (zeroblob(100000))")
    said = database.write_failure(OperationalError("INSERT", None, full.value), f"sqlite:///{tmp_path / 's.db'}",
                                  "otherwise")
    assert f"the disk that holds {tmp_path} is full: free space there" in said and "otherwise" not in said


@pytest.mark.parametrize("page", ["README.md", "docs/usage.md"])
def test_the_docs_give_make_sweeps_measured_cpu_time_with_its_machine_and_name_the_extras(page):
    text = " ".join((REPO / page).read_text().split())
    assert "24 minutes" in text and "2-core machine shared with other work" in text and "2026-12-06" in text
    assert "a few minutes on 2 cores" not in text and "about five minutes" not in text
    assert "pip install 'mlcbench[worker]'" in text and "[postgres]" in text
