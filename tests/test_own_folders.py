"""The tests run in cache and store folders of their own: never the user's ~/.cache/mlcbench (which every checkout on
a machine shares, and which a sweep of another checkout may be filling) nor ./results/mlcbench.db."""

import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from mlcbench.orchestrator.cli import app
from mlcbench.orchestrator.store import DEFAULT_DB
from mlcbench.orchestrator.store.database import sqlite_file
from mlcbench.schema.protocol import DEFAULT_CACHE_DIR, WorkerArgs

USERS_CACHE = Path.home() / ".cache" / "mlcbench"


def test_the_session_s_default_cache_and_store_are_not_the_user_s():
    for path in (DEFAULT_CACHE_DIR, WorkerArgs.parse(["run", "--jobs", "j", "--results", "r"]).cache_dir,
                 sqlite_file(DEFAULT_DB)):
        assert path is not None and path.is_absolute() and not path.is_relative_to(USERS_CACHE), path
        assert not path.is_relative_to(Path.cwd()), path
    for variable in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        assert not Path(os.environ[variable]).is_relative_to(USERS_CACHE)


def test_a_command_without_db_or_cache_dir_uses_the_folders_the_variables_name(tmp_path):
    """What the session relies on: the CLI's defaults (and a worker's, in a subprocess) follow the variables."""
    done = subprocess.run([sys.executable, "-c", "from mlcbench.schema.protocol import DEFAULT_CACHE_DIR; "
                           "from mlcbench.orchestrator.store import DEFAULT_DB; print(DEFAULT_CACHE_DIR, DEFAULT_DB)"],
                          env={**os.environ, "MLCBENCH_CACHE_DIR": str(tmp_path / "c"),
                               "MLCBENCH_DB": f"sqlite:///{tmp_path / 's.db'}"},
                          capture_output=True, text=True, check=True)
    assert done.stdout.split() == [str(tmp_path / "c"), f"sqlite:///{tmp_path / 's.db'}"]
    listed = CliRunner().invoke(app, ["results"])  # no store in the session's folder yet
    assert f"no result store at {sqlite_file(DEFAULT_DB)}" in listed.stderr
