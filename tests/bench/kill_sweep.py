"""A sweep SIGKILLed at random moments, resumed after each kill, then run to its end: the store must hold every
process whose result a worker had written before the kill, and no attempt may hold a process twice (issue 34).

The sweep: eager matmul-small and matmul-relu-small at batch 1, 2, 4 and 8, 3 processes a cell, a fresh worker process
for each (the `local` runtime: real workers on this CPU), a SQLite store. Odd kills land at a random moment of a run;
even ones the moment a new result line appears (a random one of the moments where a result is written and maybe not
yet stored, which a uniform draw seldom hits). It runs as a child process
(`kill_sweep.py --child`), so that the kill hits a real orchestrator, whose workers then end within a second
(workers/orphan.py). After each kill, once no worker of the sweep is left, every `ok` line in the exchange folders is a
process a worker wrote, known by its sweep (the folder's sweep.json), its round (the folder) and its job. After the
last run, each must be in a stored attempt of its cell with the same sweep, round and timed calls, and no attempt may
hold a (sweep, round) twice.

Run: .venv/bin/python tests/bench/kill_sweep.py [--kills 20] [--seed 1]"""

import argparse
import contextlib
import json
import os
import platform
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

from mlcbench.orchestrator import sweep as sweeping
from mlcbench.orchestrator.gpu import Target
from mlcbench.orchestrator.planner import stored_processes
from mlcbench.orchestrator.runtimes.base import StopRequest
from mlcbench.orchestrator.store import Store
from mlcbench.schema import Repetition, Result, Suite, SuiteEntry
from mlcbench.schema.protocol import read_lines
from tests.processes import workers_left

SUITE = Suite(name="kill", description="small cells in several processes", entries=[SuiteEntry(
    models=["matmul-small", "matmul-relu-small"], workflows=["eager"], batch_sizes=[1, 2, 4, 8], warmup=1, repeats=3,
    repetition=Repetition(processes=3), timeout_s=120)])
# where in its run a kill lands: from the orchestrator's start-up to past a worker's start-up and job
KILL_AFTER_S = (0.3, 25.0)

Process = tuple[str, int, str]  # (sweep id, round, job id)


def child(db: str, workdir: Path, cache_dir: Path) -> None:
    options = sweeping.SweepOptions(suite=SUITE, env_names=["local"], target=Target(tag="cpu", device="cpu", gpus=()),
                                    workdir=workdir, cache_dir=cache_dir)
    stop = StopRequest()
    with sweeping.stop_on_sigint(stop):
        sweeping.run(options, Store(db), stop=stop)


def start(db: str, workdir: Path, cache_dir: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, __file__, "--child", db, str(workdir), str(cache_dir)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def written(workdir: Path) -> dict[Process, list[float]]:
    """Every ok process result in the exchange folders: (sweep, round, job) -> its timed calls."""
    found: dict[Process, list[float]] = {}
    for described in workdir.glob("*/sweep.json"):
        sweep_id = json.loads(described.read_text())["sweep_id"]
        for results in described.parent.glob("round-*/unit-*/worker-*/results.jsonl"):
            round_index = int(results.parts[-4].removeprefix("round-"))
            for line in read_lines(results):
                result = Result.model_validate_json(line)
                if result.status == "ok":
                    found[(sweep_id, round_index, result.job_id)] = result.metrics.latency.processes[0].samples_ms
    return found


def stored(db: str) -> tuple[dict[Process, list[float]], int]:
    """Every process in the store's attempts, and how many times an attempt held one twice."""
    found: dict[Process, list[float]] = {}
    twice = 0
    for _, result in Store(db).attempts():
        keys = Counter()
        for process in stored_processes(result):
            key = (process.sweep_id, process.round, result.job_id)
            keys[key] += 1
            found[key] = process.samples_ms
        twice += sum(count - 1 for count in keys.values())
    return found, twice


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", type=Path, help="keep the store and work folders in a folder made under this one")
    parser.add_argument("--child", nargs=3, metavar=("DB", "WORKDIR", "CACHE_DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child[0], Path(args.child[1]), Path(args.child[2]))
        return 0
    import torch

    print(f"# tests/bench/kill_sweep.py on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC: {platform.platform()}, "
          f"{os.cpu_count()} CPUs, Python {platform.python_version()}, torch {torch.__version__}; "
          f"{args.kills} kills, seed {args.seed}", flush=True)
    rng = random.Random(args.seed)
    began = time.monotonic()
    with contextlib.ExitStack() as stack:
        folder = tempfile.mkdtemp(dir=args.keep) if args.keep else stack.enter_context(tempfile.TemporaryDirectory())
        db, workdir, cache_dir = f"sqlite:///{folder}/store.db", Path(folder) / "work", Path(folder) / "cache"
        seen: dict[Process, list[float]] = {}
        read_back: set[Process] = set()  # written and not stored at a kill: left to the next run to read back
        for kill in range(1, args.kills + 1):
            before = len(written(workdir))
            process = start(db, workdir, cache_dir)
            began_run = time.monotonic()
            after = rng.uniform(*KILL_AFTER_S)
            moment = "at random" if kill % 2 else "at a new result"
            while process.poll() is None and time.monotonic() - began_run < KILL_AFTER_S[1] * 2:
                if (kill % 2 and time.monotonic() - began_run >= after) or (
                        not kill % 2 and len(written(workdir)) > before):
                    break
                time.sleep(0.01)
            after = time.monotonic() - began_run
            note = "ended before the kill" if process.poll() is not None else "killed"
            process.send_signal(signal.SIGKILL)
            process.wait()
            deadline = time.monotonic() + 10
            while workers_left(workdir) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not workers_left(workdir), "a worker outlived its SIGKILLed orchestrator"
            seen.update(written(workdir))
            in_store, _ = stored(db)
            unstored = {key for key in seen if key not in in_store}
            read_back |= unstored
            print(f"kill {kill:2d} {moment:<15} after {after:5.2f} s ({note}): {len(seen):2d} process results "
                  f"written so far, {len(unstored)} of them not stored at the kill", flush=True)
        final = start(db, workdir, cache_dir)
        _, err = final.communicate(timeout=600)
        assert final.returncode == 0, err
        seen.update(written(workdir))
        in_store, twice = stored(db)
        missing = [key for key in seen if key not in in_store]
        changed = [key for key in seen if key in in_store and in_store[key] != seen[key]]
        cells = Store(db).cells()
        complete = sum(len(result.metrics.latency.processes) == 3 for result in cells)
    print(f"after the last run: {len(seen)} process results written ({len(read_back)} left unstored by a kill, for the "
          f"next run to read back), {len(seen) - len(missing)} stored, "
          f"{len(missing)} missing, {len(changed)} stored with other timed calls, {twice} held twice in an attempt; "
          f"{complete} of {len(cells)} cells with their 3 processes; {time.monotonic() - began:.0f} s in all")
    for key in missing:
        print(f"missing: sweep {key[0]}, round {key[1]}, job {key[2]}")
    verdict = not missing and not changed and not twice and complete == len(cells) == 8
    print("PASS" if verdict else "FAIL", flush=True)
    return 0 if verdict else 1


if __name__ == "__main__":
    sys.exit(main())
