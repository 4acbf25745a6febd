"""`mlcbench results --history` on a store of many attempts (issue 34: 48.7 s for 25k attempts, when every attempt was
read and drawn). Fills a fresh SQLite store with N attempts of a few cells, then times the command as a user runs it:
the default (the latest 50 attempts), and --limit 0 (every attempt) for comparison.

Run: .venv/bin/python tests/bench/history_listing.py [--attempts 25000]"""

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from mlcbench.orchestrator.store import Store
from mlcbench.schema import JobSpec, Result

BATCH = 1000


def fill(url: str, attempts: int) -> None:
    store = Store(url)
    jobs = [JobSpec(model="matmul-small", workflow="eager", precision="fp32", batch_size=batch, device="cpu")
            for batch in (1, 2, 4, 8)]
    for start in range(0, attempts, BATCH):
        chunk = []
        for index in range(start, min(start + BATCH, attempts)):
            job = jobs[index % len(jobs)]
            result = Result(job_id=job.job_id, job=job, status="ok")
            chunk.append((result.model_copy(update={"provenance": result.provenance.model_copy(update={
                "env": "local", "gpu_tag": "cpu", "sweep_id": f"sweep-{index // 100}",
                "ended_at": datetime(2026, 1, 1, tzinfo=timezone.utc)})}), f"sweep-{index // 100}"))
        store.put_all(chunk)
    store.engine.dispose()


def timed(*arguments: str) -> float:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "mlcbench.orchestrator", *arguments], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "160"})
    assert done.returncode == 0, done.stderr
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=25_000)
    arguments = parser.parse_args()
    print(f"# results --history on {arguments.attempts} attempts; {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; "
          f"mlcbench {metadata.version('mlcbench')}, Python {platform.python_version()}, {platform.node()} "
          f"({os.cpu_count()} CPUs, shared with other work)")
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'store.db'}"
        fill(url, arguments.attempts)
        print(f"interpreter start and import alone (mlcbench --version): {timed('--version'):.1f} s")
        for extra in ([], ["--limit", "0"]):
            seconds = timed("results", "--history", "--db", url, *extra)
            print(f"results --history {' '.join(extra) or '(default --limit 50)'}: {seconds:.1f} s")


if __name__ == "__main__":
    main()
