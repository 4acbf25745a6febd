import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pytest
from sqlalchemy import create_engine, text

REPO = Path(__file__).resolve().parents[1]
POSTGRES_URL = os.environ.get("MLCBENCH_TEST_POSTGRES_URL")
NO_POSTGRES = "MLCBENCH_TEST_POSTGRES_URL is unset; run `eval \"$(bash .ci/postgres-setup.sh | tail -1)\"` first"
# what the test session points mlcbench's (and torch's) default cache and store folders at, instead of the user's
# ~/.cache/mlcbench (which every checkout on a machine shares) and ./results/mlcbench.db
SESSION_FOLDERS = {"MLCBENCH_CACHE_DIR": "cache", "MLCBENCH_DB": "results/mlcbench.db",
                   "TORCHINDUCTOR_CACHE_DIR": "torchinductor", "TRITON_CACHE_DIR": "triton"}


# set when pytest imports this file, before the conftest files below it (which import mlcbench, whose defaults read
# them), and inherited by every subprocess
SESSION_ROOT = Path(tempfile.mkdtemp(prefix="mlcbench-tests-"))
for _variable, _folder in SESSION_FOLDERS.items():
    os.environ[_variable] = f"sqlite:///{SESSION_ROOT / _folder}" if _variable == "MLCBENCH_DB" \
        else str(SESSION_ROOT / _folder)


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(SESSION_ROOT, ignore_errors=True)


def say(config: pytest.Config, line: str) -> None:
    """A line on the terminal now, past pytest's capture and -q: for a fixture that works for minutes before the first
    test of its module reports (a reader of `make test` would otherwise see nothing)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(line)


@pytest.fixture
def mlcbench(tmp_path):
    """Run the CLI as a user would, in a scratch folder (so results/, the default store's folder, lands there)."""

    def run(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "mlcbench.orchestrator", *args], cwd=tmp_path, capture_output=True,
                              text=True, timeout=timeout,
                              env={**os.environ, "MLCBENCH_DB": "sqlite:///results/mlcbench.db", **(env or {})})

    return run


@pytest.fixture
def schema_url():
    """A fresh PostgreSQL schema per test (search_path), dropped afterwards: tests never see each other's rows."""
    if not POSTGRES_URL:
        pytest.skip(NO_POSTGRES)
    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(POSTGRES_URL)
    with admin.begin() as connection:
        connection.execute(text(f"CREATE SCHEMA {name}"))
    separator = "&" if "?" in POSTGRES_URL else "?"
    yield f"{POSTGRES_URL}{separator}options=-csearch_path%3D{name}"
    with admin.begin() as connection:
        connection.execute(text(f"DROP SCHEMA {name} CASCADE"))
    admin.dispose()


@pytest.fixture
def immutable(tmp_path):
    """Makes a file unwritable even for root (chattr +i), or, for other users, read-only; undone afterwards."""
    made = []

    def make(path: Path) -> None:
        if os.geteuid() == 0:
            if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode != 0:
                pytest.skip("chattr +i is not available on this filesystem")
        else:
            path.chmod(0o444)
        made.append(path)

    yield make
    for path in made:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(path)], check=True)


@dataclass
class EndedWorker:
    """A stand-in for a worker process that has already ended (a runtime's start_worker writes whatever result lines
    it should have written first): its exit code and log."""

    exit_code: int = 0
    log: str = ""

    def poll(self) -> Optional[int]:
        return self.exit_code

    def kill(self) -> None: ...

    def log_tail(self, chars: int = 4000) -> str:
        return self.log

    def oom_killed(self) -> bool:
        return False


def results_of(runtime, jobs: list, workdir: Path, **options) -> list:
    """The results the host reads back for `jobs` run through `runtime` (the follower's run_jobs, with its options),
    the runtime closed afterwards."""
    from mlcbench.orchestrator.runtimes.follower import run_jobs

    results = []
    try:
        run_jobs(runtime, jobs, workdir, results.append, **options)
    finally:
        runtime.close()
    return results


@pytest.fixture
def envs_copy(tmp_path, monkeypatch) -> Path:
    """A private copy of envs/ that env discovery reads (MLCBENCH_ENVS_DIR), so tests can edit its files."""
    from mlcbench.orchestrator.envs import ENVS_DIR_VARIABLE

    root = tmp_path / "envs"
    shutil.copytree(REPO / "envs", root)
    monkeypatch.setenv(ENVS_DIR_VARIABLE, str(root))
    return root


# a decoder outside the Llama family, small enough for any test
GPT2_TINY_CONFIG = {"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 512,
                    "n_positions": 128}


@pytest.fixture
def gpt2_suite(tmp_path) -> Path:
    """A suite file whose own model is a tiny GPT-2 from its config folder, through eager and torch_compile_decode:
    a decoder Hugging Face runs but the compiled decode loop has no code for."""
    folder = tmp_path / "configs" / "gpt2-tiny"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["GPT2LMHeadModel"], **GPT2_TINY_CONFIG, "torch_dtype": "float32"}))
    suite = tmp_path / "gpt2.toml"
    suite.write_text('name = "gpt2"\ndescription = "an architecture outside the Llama family"\n'
                     '[models.gpt2-tiny]\nconfig = "configs/gpt2-tiny"\n'
                     '[[entries]]\nmodels = ["gpt2-tiny"]\nworkflows = ["eager", "torch_compile_decode"]\n'
                     'batch_sizes = [1]\ninput_len = 8\noutput_len = 4\nwarmup = 0\nrepeats = 1\n'
                     'repetition = { processes = 1 }\n')
    return suite
