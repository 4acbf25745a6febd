"""What a study commits beside its store is what the current code makes of that store: the paper sweep's wall-time
breakdown and its estimate for 1, 2 and 4 GPUs (a table the code would no longer produce is re-derived or removed)."""

import subprocess
import sys
from pathlib import Path

import pytest

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
