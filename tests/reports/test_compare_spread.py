"""`compare --db A --against B` says whether B's worker processes land closer together than A's: a start-up path
that makes processes alike would make every interval falsely narrow (issue 49's bias check)."""

from collections import Counter

from typer.testing import CliRunner

from mlcbench.orchestrator import sweep as sweeping
from mlcbench.orchestrator.cli import app
from mlcbench.orchestrator.gpu import Target
from mlcbench.orchestrator.runtimes.simulated import SimulatedRuntime
from mlcbench.orchestrator.store import Store
from mlcbench.schema import JobSpec, Repetition, Suite, SuiteEntry
from tests.orchestrator.test_repetition import _timed

runner = CliRunner()
SUITE = Suite(name="spread", description="cells for the spread check", entries=[SuiteEntry(
    models=["matmul-small", "ffn-small"], workflows=["eager"], batch_sizes=[1, 2, 4], warmup=0, repeats=3,
    repetition=Repetition(processes=6))])


def sweep_into(path, levels: list[float]) -> None:
    """Each cell's k-th process runs at levels[k] (its calls alike), so the spread between processes is set."""
    calls: Counter = Counter()

    def answer(job: JobSpec):
        calls[job.job_id] += 1
        level = levels[(calls[job.job_id] - 1) % len(levels)]
        return _timed(job, [level, level * 1.01, level * 0.99])

    options = sweeping.SweepOptions(suite=SUITE, env_names=["local"], workdir=path.parent / f"work-{path.stem}",
                                    target=Target(tag="cpu", device="cpu", gpus=()))
    sweeping.run(options, Store(f"sqlite:///{path}"),
                 runtime_factory=lambda env, _o, _g: SimulatedRuntime(env, seconds=lambda job: 0.0, answer=answer))


def test_compare_finds_processes_made_alike_narrower_and_alike_spreads_no_different(tmp_path):
    apart = [1.0, 1.3, 0.8, 1.15, 0.9, 1.25]
    sweep_into(tmp_path / "exec.db", apart)
    sweep_into(tmp_path / "fork.db", [1.0, 1.01, 0.99, 1.005, 0.995, 1.0])
    sweep_into(tmp_path / "again.db", list(reversed(apart)))
    narrower = runner.invoke(app, ["compare", "--db", str(tmp_path / "exec.db"), "--against",
                                   str(tmp_path / "fork.db")])
    assert narrower.exit_code == 0, narrower.output
    text = " ".join(narrower.stdout.split())
    assert "Between processes (each process's median whole call, 6 cell(s) with ≥ 3 processes a side)" in text
    assert "narrower in 6 of 6 cell(s)" in text and text.split("Brown–Forsythe p = ")[1].split(": ")[1].startswith(
        "narrower.")
    same = runner.invoke(app, ["compare", "--db", str(tmp_path / "exec.db"), "--against", str(tmp_path / "again.db")])
    assert "): no difference." in " ".join(same.stdout.split()), same.output
