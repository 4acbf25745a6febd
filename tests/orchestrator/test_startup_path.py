"""The forked start-up path: workers forked from a pre-imported interpreter (workers/zygote.py) keep the crash
isolation, timeouts and results of workers started as new interpreters, each round has a zygote of its own, every
result says which path started it, and what a process cost before its first timed call is recorded."""

import sys
import time

import pytest

from mlcbench.orchestrator import sweep as sweeping
from mlcbench.orchestrator.gpu import Target
from mlcbench.orchestrator.runtimes.forking import Zygote, ZygoteUnavailable
from mlcbench.orchestrator.runtimes.local import LocalRuntime
from mlcbench.orchestrator.store import Store
from mlcbench.schema import Repetition, Suite, SuiteEntry
from mlcbench.schema.protocol import zygote_command
from tests.conftest import results_of
from tests.orchestrator.test_runtime_local import LOCAL, job


def forking(tmp_path) -> LocalRuntime:
    return LocalRuntime(LOCAL, cache_dir=tmp_path / "cache", extra_env={"MLCBENCH_TEST_FAULTS": "1"}, startup="fork")


def test_forked_workers_answer_crash_and_recover_as_new_interpreters_do(tmp_path):
    runtime = forking(tmp_path)
    try:
        jobs = [job("eager"), job("fault-kill"), job("fault-segfault"), job("eager", batch_size=2)]
        results = results_of(runtime, jobs, tmp_path / "work")
    finally:
        runtime.close()
    assert [result.status for result in results] == ["ok", "crashed", "crashed", "ok"]
    assert "SIGKILL" in results[1].reason and "SIGSEGV" in results[2].reason
    assert "Fatal Python error" in results[2].log_tail  # faulthandler's stack, as in a new interpreter
    assert runtime.fork_refused is None
    assert all(result.provenance.startup == "fork" for result in (results[0], results[3]))
    process = results[0].metrics.latency.processes[0]
    assert process.startup_s is not None and process.startup_s >= 0
    assert process.launched_at <= results[0].provenance.started_at <= process.ended_at


def test_a_forked_worker_that_hangs_times_out_and_is_killed(tmp_path):
    runtime = forking(tmp_path)
    try:
        begin = time.monotonic()
        results = results_of(runtime, [job("fault-hang", timeout_s=3), job("eager")], tmp_path / "work")
    finally:
        runtime.close()
    assert [result.status for result in results] == ["timeout", "ok"]
    assert time.monotonic() - begin < 120


def test_each_round_forks_from_a_zygote_of_its_own_and_results_name_the_path(tmp_path):
    suite = Suite(name="two", description="one cell, two processes", entries=[
        SuiteEntry(models=["matmul-small"], workflows=["eager"], batch_sizes=[1], warmup=0, repeats=2,
                   repetition=Repetition(processes=2))])
    options = sweeping.SweepOptions(suite=suite, env_names=["local"], workdir=tmp_path / "work",
                                    cache_dir=tmp_path / "cache", target=Target(tag="cpu", device="cpu", gpus=()),
                                    startup="fork")
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    sweeping.run(options, store)
    (cell,) = store.cells()
    assert cell.status == "ok" and cell.provenance.startup == "fork"
    assert len(cell.metrics.latency.processes) == 2
    assert len(list((tmp_path / "work").rglob("zygote.log"))) == 2  # round 0's and round 1's


def test_a_zygote_that_cannot_fork_fresh_workers_says_why_and_the_runtime_starts_new_interpreters(tmp_path):
    command = [sys.executable, "-c", "import json; print(json.dumps({'ready': False, 'unsafe': 'threads'}))"]
    with pytest.raises(ZygoteUnavailable, match="threads"):
        Zygote(command, {}, tmp_path / "zygote.log", tmp_path)

    class Refusing(LocalRuntime):
        def _forking(self, folder):
            raise ZygoteUnavailable("CUDA was initialised by the imports")

    runtime = Refusing(LOCAL, cache_dir=tmp_path / "cache", startup="fork")
    (result,) = results_of(runtime, [job("eager")], tmp_path / "work")
    assert result.status == "ok" and result.provenance.startup == "exec"
    assert runtime.fork_refused == "CUDA was initialised by the imports"
    assert zygote_command("python", "/cache")[-2:] == ["zygote", "/cache"]
