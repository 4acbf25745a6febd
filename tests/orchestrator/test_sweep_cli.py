"""The sweep tells the truth at the end: a closing line with the counts, the store and how to see the failures; exit
code 0 only when nothing failed; empty filters refused; --version; result tables readable in 80 columns."""

import re

from rich.console import Console
from typer.testing import CliRunner

from mlcbench.orchestrator import sweep as sweeping
from mlcbench.orchestrator.cli import app
from mlcbench.orchestrator.errors import ExitCode
from mlcbench.orchestrator.reports.tables import results_table
from mlcbench.orchestrator.runtimes.simulated import SimulatedRuntime
from mlcbench.schema import Correctness, JobSpec, Metrics, Result
from tests.orchestrator.stores import JOB, tagged
from tests.orchestrator.test_repetition import _timed
from tests.orchestrator.test_store_history import KillingRuntime

runner = CliRunner()
TINY = ["sweep", "--suite", "tiny", "--model", "matmul-small"]


def test_a_sweep_with_failures_says_so_at_the_end_and_exits_3(tmp_path, monkeypatch):
    db = f"sqlite:///{tmp_path / 'store.db'}"
    monkeypatch.setattr(sweeping, "make_runtime", lambda env, _o, _g: SimulatedRuntime(env, lambda job: 0.0))
    ok = runner.invoke(app, [*TINY, "--batch-size", "1,2", "--db", db, "--workdir", str(tmp_path / "w")])
    assert ok.exit_code == ExitCode.OK, ok.output
    assert ok.stdout.strip().splitlines()[-1] == (f"2 ok · 0 unsupported · 0 failed/oom/timeout/crashed · 0 failed "
                                                  f"check(s) · 0 lost process(es); store {db}")

    monkeypatch.setattr(sweeping, "make_runtime", lambda env, _o, _g: KillingRuntime(env))
    failed = runner.invoke(app, [*TINY, "--db", db, "--workdir", str(tmp_path / "w")])
    assert failed.exit_code == ExitCode.JOBS_FAILED, failed.output
    last = failed.stdout.strip().splitlines()[-1]
    assert last.startswith("0 ok · 0 unsupported · 2 failed/oom/timeout/crashed · 0 failed check(s) · 0 lost "
                           "process(es) · 2 skipped (already stored")
    assert last.endswith(f"see why: mlcbench results --db {db} --status failed,oom,timeout,crashed")
    listed = runner.invoke(app, ["results", "--db", db, "--status", "failed,oom,timeout,crashed"])
    assert listed.exit_code == 0 and "2 stored result(s)" in listed.output


def test_a_wrong_answer_or_a_lost_process_is_counted_in_the_closing_line_and_exits_3(tmp_path, monkeypatch):
    """A cell whose check failed against eager, and one whose second worker process crashed (a warm start that
    fails), both end `ok`: the closing line counts them and the exit code is not 0."""
    suite = tmp_path / "two.toml"
    suite.write_text('name = "two"\ndescription = "two processes a cell"\n[[entries]]\nmodels = ["matmul-small"]\n'
                     'workflows = ["eager"]\nbatch_sizes = [1, 2]\nrepetition = { processes = 2 }\n')
    processes: dict[int, int] = {}

    def answer(job: JobSpec) -> Result | None:
        processes[job.batch_size] = processes.get(job.batch_size, 0) + 1
        if job.batch_size == 1 and processes[1] == 2:
            return None  # the worker dies in the cell's second process
        timed = _timed(job, [1.0, 1.1, 0.9])
        if job.batch_size == 2:
            wrong = Correctness(tolerance=1e-3, passed=False, rel_l2_error=0.2)
            timed = timed.model_copy(update={"correctness": wrong, "metrics": Metrics(
                latency=timed.metrics.latency.model_copy(update={"processes": [
                    timed.metrics.latency.processes[0].model_copy(update={"correctness": wrong})]}),
                tflops=timed.metrics.tflops)})
        return timed

    monkeypatch.setattr(sweeping, "make_runtime",
                        lambda env, _o, _g: SimulatedRuntime(env, lambda job: 0.0, answer=answer))
    db = f"sqlite:///{tmp_path / 'store.db'}"
    done = runner.invoke(app, ["sweep", "--suite", str(suite), "--db", db, "--workdir", str(tmp_path / "w")])
    assert done.exit_code == ExitCode.JOBS_FAILED, done.output
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("2 ok · 0 unsupported · 0 failed/oom/timeout/crashed · 1 failed check(s) · 1 lost "
                           "process(es); store"), last
    assert last.endswith(f"see why (the reason column): mlcbench results --db {db}")


def test_empty_filters_are_refused_not_everything(tmp_path):
    db = f"sqlite:///{tmp_path / 'store.db'}"
    for option in ("--workflow", "--env", "--model", "--batch-size"):
        done = runner.invoke(app, ["sweep", option, "", "--db", db])
        assert done.exit_code == ExitCode.USAGE and f"error: {option} '' has an empty name" in done.stderr
    done = runner.invoke(app, ["sweep", "--batch-size", "1,x", "--db", db])
    assert done.exit_code == ExitCode.USAGE and "expected positive whole numbers" in done.stderr
    done = runner.invoke(app, ["results", "--status", "ok,", "--db", db])
    assert done.exit_code == ExitCode.USAGE and "--status 'ok,' has an empty name" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_filter_value_the_suite_lacks_is_refused_naming_the_suites_that_have_it(tmp_path):
    db = f"sqlite:///{tmp_path / 'store.db'}"
    done = runner.invoke(app, ["sweep", "--suite", "tiny", "--workflow", "eager,torch_compile_openxla", "--db", db])
    assert done.exit_code == ExitCode.USAGE, done.output
    assert done.stderr.startswith("error: workflow 'torch_compile_openxla' is not in suite 'tiny' "
                                  "(suites that have it: paper, smoke)")
    done = runner.invoke(app, ["sweep", "--suite", "smoke", "--batch-size", "4,64", "--db", db])
    assert done.exit_code == ExitCode.USAGE
    assert "batch size 64 is not in suite 'smoke' (suites that have it: paper" in done.stderr
    # each value is in the suite, not both together
    done = runner.invoke(app, ["sweep", "--suite", "smoke", "--model", "llama-2layer", "--batch-size", "4", "--db", db])
    assert done.exit_code == ExitCode.USAGE and "the filters leave no job of suite 'smoke'" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_version():
    done = runner.invoke(app, ["--version"])
    assert done.exit_code == 0 and re.fullmatch(r"mlcbench \d+\.\d+\.\d+\S*\n", done.stdout)


def test_the_results_table_stays_readable_in_80_columns():
    long_reason = "RuntimeError: inductor lowering failed for aten.mm because the shapes were dynamic after all"
    job = JOB.model_copy(update={"model": "ffn-multilayer-tinyllama", "workflow": "torch_compile_tensorrt"})
    results = [tagged(JOB), tagged(job, "failed", reason=long_reason), tagged(JOB, env="triton-2504")]
    narrow = Console(width=80, record=True)
    narrow.print(results_table(results, "stored"))
    text = narrow.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    for word in ("matmul-small", "ffn-multilayer-tinyllama", "torch_compile_tensorrt", "triton-2504", "failed",
                 "status", "lowering"):
        assert word in text  # never folded inside a word
    wide = Console(width=250, record=True)
    wide.print(results_table(results, "stored"))
    assert "│ ffn-multilayer-tinyllama │ torch_compile_tensorrt │" in wide.export_text()
