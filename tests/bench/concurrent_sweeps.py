"""Several sweeps started at once into one fresh SQLite store (the README promises several writers): in each trial,
SWEEPS real `mlcbench sweep` processes of the `tiny` suite, each on cells of its own (one batch size each), start at
the same moment on a store that does not exist yet. Every sweep must exit 0, and the store must then hold every cell
exactly once (no cell lost, none stored twice). Before the migration's transaction began IMMEDIATE, 2 of 3 such
sweeps failed with "database is locked" in 2 of 5 trials.

Run: .venv/bin/python tests/bench/concurrent_sweeps.py [--trials 20] [--sweeps 3]"""

import argparse
import platform
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

BATCH_SIZES = (1, 2, 4, 8)  # the tiny suite's


def trial(folder: Path, sweeps: int) -> tuple[list[int], list[str], int]:
    """Exit codes, problems found in the store, and the rows stored."""
    store = folder / "store.db"
    command = [sys.executable, "-m", "mlcbench.orchestrator", "sweep", "--suite", "tiny", "--model", "matmul-small",
               "--db", f"sqlite:///{store}", "--cache-dir", str(folder / "cache")]
    processes = [subprocess.Popen([*command, "--batch-size", str(BATCH_SIZES[index]), "--workdir",
                                   str(folder / f"work-{index}")], cwd=folder, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True) for index in range(sweeps)]
    errors = [process.communicate(timeout=600)[1] for process in processes]
    codes = [process.returncode for process in processes]
    problems = [f"sweep {index} exit {code}: {error.strip().splitlines()[-1] if error.strip() else ''}"
                for index, (code, error) in enumerate(zip(codes, errors)) if code != 0]
    if not store.exists():
        return codes, [*problems, "no store"], 0
    with sqlite3.connect(store) as connection:
        rows = connection.execute("SELECT batch_size, status FROM results").fetchall()
    per_cell = Counter(batch for batch, _ in rows)
    problems += [f"batch {batch} stored {per_cell[batch]} times" for batch in BATCH_SIZES[:sweeps]
                 if per_cell[batch] != 1]
    problems += [f"a row of status {status}" for _, status in rows if status != "ok"]
    return codes, problems, len(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--sweeps", type=int, default=3, choices=range(1, len(BATCH_SIZES) + 1))
    arguments = parser.parse_args()
    print(f"# {arguments.sweeps} sweeps at once into a fresh SQLite store, {arguments.trials} trials; "
          f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; mlcbench {metadata.version('mlcbench')}, "
          f"SQLite {sqlite3.sqlite_version}, Python {platform.python_version()}, {platform.node()} "
          f"({platform.machine()}, {__import__('os').cpu_count()} CPUs)")
    failed_trials = 0
    for index in range(arguments.trials):
        with tempfile.TemporaryDirectory() as folder:
            started = time.monotonic()
            codes, problems, rows = trial(Path(folder), arguments.sweeps)
        failed_trials += bool(problems)
        print(f"trial {index + 1:2d}: exit codes {codes}, {rows} row(s), {time.monotonic() - started:5.1f} s"
              + ("" if not problems else "; " + "; ".join(problems)), flush=True)
    print(f"{arguments.trials - failed_trials} of {arguments.trials} trials: every sweep exit 0, every cell stored "
          f"once")
    sys.exit(1 if failed_trials else 0)


if __name__ == "__main__":
    main()
