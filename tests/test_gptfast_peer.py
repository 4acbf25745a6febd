"""benchmarks/gptfast_peer.sh and its runner on a CPU: gpt-fast's loop at a 2-layer Llama, eager, through the script the
GPU session runs. gpt-fast is not in the repository: `bash benchmarks/gptfast_peer.sh fill` puts it in .peer/."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(not (REPO / ".peer/gpt-fast/generate.py").is_file(),
                                reason=".peer/gpt-fast is absent (bash benchmarks/gptfast_peer.sh fill)")


def _script(out: Path, *args: str, budget_s: int = 570) -> subprocess.CompletedProcess:
    # python3 in the script is this interpreter, as it is the machine's own on the GPU machine
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    return subprocess.run(["bash", "benchmarks/gptfast_peer.sh", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PATH": path, "OUT": str(out), "BUDGET_S": str(budget_s)})


def test_one_cell_writes_its_line(tmp_path):
    done = _script(tmp_path, "--device=cpu", "--no-compile", "--warmup=1", "--calls=2", "--greedy", "llama-2layer:2")
    assert done.returncode == 0, done.stdout + done.stderr
    [line] = (tmp_path / "gptfast-peer.jsonl").read_text().splitlines()
    result = json.loads(line)
    assert (result["model"], result["dtype"], result["batch"], result["sampling"]) == (
        "llama-2layer", "fp32", 2, "greedy (top_k=1)")
    assert len(result["samples_ms"]) == 2
    assert result["tokens_per_s"] == pytest.approx(2 * 32 / (result["median_ms"] / 1e3), rel=1e-3)
    assert "llama-2layer:2 --device=cpu --no-compile --warmup=1 --calls=2 --greedy: exit 0" in (
        tmp_path / "gptfast-peer-times.txt").read_text()


def test_cells_over_the_budget_are_left_for_the_next_call(tmp_path):
    done = _script(tmp_path, "--greedy", "llama2-7b:1", "llama2-7b:64", budget_s=100)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (tmp_path / "gptfast-peer.jsonl").exists()
    assert "bash benchmarks/gptfast_peer.sh --greedy llama2-7b:1 llama2-7b:64" in done.stdout
