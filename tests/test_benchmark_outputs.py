"""What a study commits beside its store is what the current code makes of that store: the paper sweep's wall-time
breakdown and its estimate for 1, 2 and 4 GPUs (a table the code would no longer produce is re-derived or removed)."""

import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Optional

import pytest

from mlcbench.orchestrator.store import Store
from mlcbench.schema import Metrics, ProcessTiming, Result, Timing
from tests.orchestrator.stores import JOB, T0, tagged

REPO = Path(__file__).resolve().parents[1]
PAPER = Path("benchmarks/studies/paper-h200x4")


@pytest.mark.parametrize("script, output", [("sweep_breakdown.py", "breakdown.md"),
                                            ("paper_estimate.py", "estimate.md")])
def test_a_committed_output_is_what_its_script_makes_of_the_store(script, output):
    made = subprocess.run([sys.executable, f"benchmarks/{script}", str(PAPER / "store.db")], cwd=REPO,
                          capture_output=True, text=True, timeout=300, check=True).stdout
    assert made == (REPO / PAPER / output).read_text()


def test_the_estimate_leaves_out_what_the_host_cannot_run_and_shares_the_rest_over_the_gpus():
    text = (REPO / PAPER / "estimate.md").read_text()
    assert "448 cells" in text and "| needs a package the host lacks | 48 |" in text
    walls = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in text.splitlines()
             if line.startswith("| ") and line.split("|")[1].strip() in ("1", "2", "4")}

    def seconds(duration: str) -> int:
        parts = [int(part) for part in duration.split(":")]
        return sum(part * 60 ** power for power, part in enumerate(reversed(parts)))

    one, four = seconds(walls["1"]), seconds(walls["4"])
    assert one / 4 <= four <= one / 3.5


def _cell(model: str, hostname: str, processes: list[tuple[Optional[str], Optional[str], int]]) -> Result:
    """A cell whose processes (host, compile cache, launch minute) ran one minute each; the attempt on hostname."""
    job = JOB.model_copy(update={"model": model})
    timing = Timing(median_ms=1.0, p10_ms=1.0, p90_ms=1.0, mean_ms=1.0, cv=0.0, repeats=len(processes),
                    method="perf_counter", processes=[ProcessTiming(
                        samples_ms=[1.0], host=host, compile_cache=cache, launched_at=T0 + timedelta(minutes=minute),
                        ended_at=T0 + timedelta(minutes=minute + 1)) for host, cache, minute in processes])
    result = tagged(job, metrics=Metrics(latency=timing))
    return result.model_copy(update={"provenance": result.provenance.model_copy(update={"hostname": hostname})})


def test_the_breakdown_lists_each_hosts_processes_cold_and_warm_and_their_first_and_last_launch(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    store.put(_cell("matmul-small", "lent-a", [("lent-a", "cold", 0), ("lent-a", "warm", 2)]))
    store.put(_cell("ffn-small", "lent-b", [("lent-b", "cold", 30), ("lent-b", "warm", 31), ("lent-b", None, 35)]))
    store.put(_cell("matmul-relu-small", "older", [(None, "warm", 5)]))  # an older store: the attempt's host
    made = subprocess.run([sys.executable, "benchmarks/sweep_breakdown.py", str(tmp_path / "store.db")], cwd=REPO,
                          capture_output=True, text=True, timeout=300, check=True).stdout
    assert "| lent-a | 2 | 1 | 1 | 2026-01-01 00:00:00 | 2026-01-01 00:02:00 |" in made
    assert "| lent-b | 3 | 1 | 1 | 2026-01-01 00:30:00 | 2026-01-01 00:35:00 |" in made
    assert "| older | 1 | 0 | 1 | 2026-01-01 00:05:00 | 2026-01-01 00:05:00 |" in made
