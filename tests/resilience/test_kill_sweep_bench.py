"""tests/processes.py, which tests/bench/kill_sweep.py and the kill-and-resume test use to wait for a sweep's workers,
sees them: its first version matched a bare `workers` argument, which no worker's command line has
(`python -m mlcbench.workers ...`), so it never saw one and waited for none."""

import subprocess
import sys
import time
from pathlib import Path

from mlcbench.schema.protocol import worker_command
from tests.processes import is_worker, workers_left

BENCH = Path(__file__).resolve().parents[2] / "tests" / "bench" / "kill_sweep.py"


def encoded(command: list[str]) -> list[bytes]:
    return [part.encode() for part in command]


def test_a_workers_command_line_is_a_worker_of_its_workdir_only(tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    folder = workdir / "sweep" / "round-00" / "unit-000" / "worker-000"
    command = encoded(worker_command(sys.executable, str(folder), str(tmp_path / "cache")))
    assert is_worker(command, workdir)
    assert not is_worker(command, tmp_path / "other")
    # the orchestrator it runs (kill_sweep.py --child) names the workdir too, and is no worker
    child = encoded([sys.executable, str(BENCH), "--child", f"sqlite:///{tmp_path}/store.db", str(workdir),
                     str(tmp_path / "cache")])
    assert not is_worker(child, workdir)


def test_workers_left_finds_a_live_process_with_a_workers_command_line(tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    # a sleeping python whose arguments read as a worker's (after -c, they are only its argv)
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "-m", "mlcbench.workers", "run",
                                "--jobs", str(workdir / "jobs.jsonl")])
    try:
        deadline = time.monotonic() + 10
        while process.pid not in workers_left(workdir) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert process.pid in workers_left(workdir)
        assert process.pid not in workers_left(tmp_path / "other")
    finally:
        process.kill()
        process.wait()
    assert process.pid not in workers_left(workdir)
