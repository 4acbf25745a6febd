import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def mlcbench(tmp_path):
    """Run the CLI as a user would, in a scratch folder (so results/ lands there)."""

    def run(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "mlcbench.orchestrator", *args], cwd=tmp_path, capture_output=True,
                              text=True, timeout=timeout,
                              env={**os.environ, **(env or {})})

    return run
