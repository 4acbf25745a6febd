"""ruff, as pyproject.toml's [tool.ruff] configures it, over the whole tree: CI runs it through `make test`."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _ruff() -> list[str]:
    beside = Path(sys.executable).with_name("ruff")  # the venv's, which constraints.txt pins
    if beside.is_file():
        return [str(beside)]
    if shutil.which("ruff"):
        return ["ruff"]
    pytest.skip("ruff is not installed (it is in the test extra: pip install -c constraints.txt -e '.[test]')")


def test_ruff_finds_nothing():
    done = subprocess.run([*_ruff(), "check", "--no-cache", "--output-format", "concise", str(REPO)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
