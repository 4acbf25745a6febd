"""Every process is stored as it ends: a cell's attempt after its first process, extended by each next one; what a
killed sweep's workers wrote and it never stored is read back by the next sweep; resume tops up a cell that lost a
process; the progress total follows what cells still need. Through the real sweep code with simulated workers."""

from collections import Counter
from typing import Optional

import pytest

from mlcbench.orchestrator import sweep as sweeping, workdirs
from mlcbench.orchestrator.gpu import Target
from mlcbench.orchestrator.planner import measured_in_full
from mlcbench.orchestrator.sweep.recovery import recover
from mlcbench.orchestrator.runtimes.base import StopRequest
from mlcbench.orchestrator.runtimes.simulated import SimulatedRuntime
from mlcbench.orchestrator.store import Store
from mlcbench.schema import JobSpec, Metrics, ProcessTiming, Repetition, Result, Suite, SuiteEntry, Timing


def _suite(workflows=("eager", "torch_compile")) -> Suite:
    return Suite(name="grid", description="test grid", entries=[SuiteEntry(
        models=["matmul-small", "ffn-small"], workflows=list(workflows), batch_sizes=[1], warmup=0, repeats=2,
        repetition=Repetition(processes=3))])


def _timed(job: JobSpec, level: float, cache: Optional[str] = None) -> Result:
    timing = Timing(median_ms=level, p10_ms=level, p90_ms=level, mean_ms=level, cv=0.0, repeats=2,
                    method="perf_counter", processes=[ProcessTiming(samples_ms=[level, level])])
    return Result(job_id=job.job_id, job=job, status="ok",
                  metrics=Metrics(latency=timing, compile_s=1.0 if cache else None, compile_cache=cache))


def _run(tmp_path, store: Store, answer, listener: Optional[sweeping.SweepListener] = None, suite: Suite = None,
         name: str = "work") -> sweeping.SweepReport:
    options = sweeping.SweepOptions(suite=suite or _suite(), env_names=["local"], workdir=tmp_path / name,
                                    target=Target(tag="cpu", device="cpu", gpus=()))
    runtime = lambda env, _options, _gpu: SimulatedRuntime(env, seconds=lambda job: 0.0, answer=answer)  # noqa: E731
    return sweeping.run(options, store, listener, runtime_factory=runtime)


class Killed(BaseException):
    """Stands for a SIGKILL of the orchestrator: nothing after it runs."""


def test_a_cells_attempt_is_stored_after_its_first_process_and_extended_in_its_row(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    seen: list[tuple[int, int]] = []

    class Watch(sweeping.SweepListener):
        def job_done(self, result: Result) -> None:
            [row] = store.rows(job_id=result.job_id)  # one row, growing
            seen.append((row.id, len(row.result().metrics.latency.processes)))

    _run(tmp_path, store, lambda job: _timed(job, 1.0), Watch(), _suite(("eager",)))
    assert len(seen) == 6 and seen[0][1] == 1  # the first ok is there after the first process
    per_row = Counter(row_id for row_id, _ in seen)
    assert sorted(per_row.values()) == [3, 3]
    assert sorted(count for _, count in seen) == [1, 1, 2, 2, 3, 3]
    assert len(store.history()) == 2 and all(measured_in_full(cell) for cell in store.cells())


def test_the_results_a_killed_sweep_never_stored_are_read_back_by_the_next_sweep_once(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    arrived = Counter()

    class KilledAtTheFifthResult(sweeping.SweepListener):
        def process_done(self, result: Result) -> None:
            arrived["results"] += 1
            if arrived["results"] == 5:  # the worker wrote it, the orchestrator dies before storing it
                raise Killed

    levels = Counter()

    def answer(job: JobSpec) -> Result:
        levels[job.job_id] += 1
        return _timed(job, float(levels[job.job_id]))

    with pytest.raises(Killed):
        _run(tmp_path, store, answer, KilledAtTheFifthResult())
    stored = sum(len(cell.metrics.latency.processes) for cell in store.cells())
    assert stored == 4
    [folder] = [path for path in (tmp_path / "work").iterdir() if path.is_dir()]
    written = sum(len(path.read_text().splitlines()) for path in folder.rglob("results.jsonl"))
    assert written == 5

    assert recover(tmp_path / "work", store) == 1
    assert (folder / workdirs.ENDED).exists()
    assert recover(tmp_path / "work", store) == 0  # once
    assert sum(len(cell.metrics.latency.processes) for cell in store.cells()) == 5
    for _, result in store.attempts():
        keys = [(process.sweep_id, process.round) for process in result.metrics.latency.processes]
        assert len(keys) == len(set(keys))

    # the next sweep reads back nothing more and tops every cell up to its 3 processes
    report = _run(tmp_path, store, answer, name="work")
    assert report.recovered == 0
    cells = store.cells()
    assert len(cells) == 4 and all(len(cell.metrics.latency.processes) == 3 for cell in cells)
    assert sum(levels.values()) == 5 + 4 * 3 - 5


def test_a_live_sweeps_folder_is_not_read_back(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    recovered: list[int] = []

    class RecoverMeanwhile(sweeping.SweepListener):
        def process_done(self, result: Result) -> None:
            recovered.append(recover(tmp_path / "work", store))

    _run(tmp_path, store, lambda job: _timed(job, 1.0), RecoverMeanwhile(), _suite(("eager",)))
    assert recovered and set(recovered) == {0}
    assert all(len(cell.metrics.latency.processes) == 3 for cell in store.cells())


def test_resume_tops_up_a_cell_that_lost_a_process(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    calls = Counter()

    def dies_on_the_second(job: JobSpec) -> Optional[Result]:
        calls[job.job_id] += 1
        return None if calls[job.job_id] == 2 else _timed(job, 1.0)

    suite = _suite(("eager",))
    _run(tmp_path, store, dies_on_the_second, suite=suite)
    lost = store.cells()
    assert all(len(cell.metrics.latency.processes) == 1 and cell.metrics.latency.lost_processes == 1
               and not measured_in_full(cell) for cell in lost)
    report = _run(tmp_path, store, lambda job: _timed(job, 2.0), suite=suite, name="again")
    assert report.skipped == 0
    cells = store.cells()
    assert all(sorted(p.samples_ms[0] for p in cell.metrics.latency.processes) == [1.0, 2.0, 2.0] for cell in cells)
    assert all(measured_in_full(cell) for cell in cells)


def test_the_progress_total_follows_what_the_cells_still_need(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    calls = Counter()

    def answer(job: JobSpec) -> Result:
        calls[job.job_id] += 1
        if job.model == "ffn-small" and job.workflow == "eager":
            return Result.without_run(job, "unsupported", "this worker cannot")
        cold = job.workflow == "torch_compile" and calls[job.job_id] == 1
        return _timed(job, 2.0 if cold else 1.0, "cold" if cold else "warm" if job.workflow != "eager" else None)

    class Count(sweeping.SweepListener):
        total = done = 0

        def planned(self, to_run: int, skipped: int) -> None:
            self.total = to_run

        def due_changed(self, processes: int) -> None:
            self.total += processes

        def process_done(self, result: Result) -> None:
            self.done += 1

    counted = Count()
    _run(tmp_path, store, answer, counted)
    # 4 cells x 3: one ends unsupported after one process (2 fewer), two compile cold first (one more each)
    assert counted.total == counted.done == 12 - 2 + 2 == sum(calls.values())


def test_a_worker_whose_orchestrator_died_before_it_started_ends_at_once(tmp_path):
    """Its parent is then whatever adopted it: the orchestrator's pid in its environment tells (a worker that took
    its adopter for its orchestrator ran its jobs for nobody, writing results after the next sweep had read back the
    folder)."""
    import os
    import subprocess
    import sys

    from mlcbench.schema.protocol import ORCHESTRATOR_PID_ENV, RESULTS_FILE, worker_command

    job = _suite(("eager",)).expand("cpu")[0]
    (tmp_path / "jobs.jsonl").write_text(job.model_dump_json() + "\n")
    command = worker_command(sys.executable, str(tmp_path), str(tmp_path / "cache"))
    not_its_parent = {**os.environ, ORCHESTRATOR_PID_ENV: str(os.getppid())}
    orphan = subprocess.run(command, env=not_its_parent, cwd=tmp_path, timeout=120, start_new_session=True)
    assert orphan.returncode != 0 and not (tmp_path / RESULTS_FILE).exists()
    its_parent = {**os.environ, ORCHESTRATOR_PID_ENV: str(os.getpid())}
    assert subprocess.run(command, env=its_parent, cwd=tmp_path, timeout=300).returncode == 0
    assert Result.model_validate_json((tmp_path / RESULTS_FILE).read_text()).status == "ok"


def test_a_process_read_back_joins_the_processes_its_sweep_went_on_from(tmp_path):
    """The killed sweep resumed a cell from an earlier attempt and stored nothing of its own before the kill: the
    process read back is stored with the earlier ones, as that sweep would have."""
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    suite = _suite(("eager",))

    def run_until(name: str, stop_at: int, exception: Optional[type] = None, level: float = 1.0) -> None:
        stop = StopRequest()
        count = Counter()

        class Stop(sweeping.SweepListener):
            def process_done(self, result: Result) -> None:
                count["done"] += 1
                if count["done"] == stop_at:
                    if exception is not None:
                        raise exception
                    stop.after_job.set()

        options = sweeping.SweepOptions(suite=suite, env_names=["local"], workdir=tmp_path / name,
                                        target=Target(tag="cpu", device="cpu", gpus=()))
        runtime = lambda env, _o, _g: SimulatedRuntime(env, seconds=lambda job: 0.0,  # noqa: E731
                                                       answer=lambda job: _timed(job, level))
        sweeping.run(options, store, Stop(), runtime_factory=runtime, stop=stop)

    run_until("first", 2)  # both cells stored with one process
    assert all(len(cell.metrics.latency.processes) == 1 for cell in store.cells())
    with pytest.raises(Killed):
        run_until("second", 1, Killed, level=2.0)  # its first result written, never stored
    assert recover(tmp_path / "second", store) == 1
    levels = sorted(sorted(p.samples_ms[0] for p in cell.metrics.latency.processes) for cell in store.cells())
    assert levels == [[1.0], [1.0, 2.0]]


def test_a_cells_first_ok_line_is_printed_after_its_first_process_not_after_the_whole_sweep(tmp_path, monkeypatch):
    """Rounds run every cell's first process, then every second one: `sweep` prints a cell's `ok` after its first
    process, with the count, and again when the cell has all its processes."""
    from typer.testing import CliRunner

    from mlcbench.orchestrator.cli import app

    answered = []

    def answer(job: JobSpec) -> Result:
        answered.append(job.model)
        print(f"<worker answered {len(answered)}>")
        return _timed(job, 1.0)

    # every process after the first takes 1 s: time enough for the host (polling every 0.05 s) to print the first
    monkeypatch.setattr(sweeping, "make_runtime", lambda env, _o, _g: SimulatedRuntime(
        env, lambda job: 1.0 if answered else 0.0, answer=answer))
    suite = tmp_path / "grid.toml"
    suite.write_text('name = "grid"\ndescription = "two cells of 3 processes"\n[[entries]]\n'
                     'models = ["matmul-small", "ffn-small"]\nworkflows = ["eager"]\nbatch_sizes = [1]\n'
                     'repetition = { processes = 3 }\n')
    done = CliRunner().invoke(app, ["sweep", "--suite", str(suite), "--gpu", "cpu", "--db", str(tmp_path / "s.db"),
                                    "--workdir", str(tmp_path / "w")])
    assert done.exit_code == 0 and len(answered) == 6, done.output
    # each line ends with the sweep's progress and time left: "(2/6 processes, eta 0:02)"
    lines = [line.strip().split("  (")[0] for line in done.stdout.splitlines()]
    first_ok = next(i for i, line in enumerate(lines) if line.startswith("ok"))
    assert lines[first_ok].endswith("1 process") and first_ok < lines.index("<worker answered 2>"), done.stdout
    assert sum(line.startswith("ok") and line.endswith("3 processes") for line in lines) == 2, done.stdout
    assert "(6/6 processes, eta " in done.stdout
