"""What a new user hit (issue 55): a GPU suite planned on a CPU says so; a typo in a read command's --workflow is
refused naming the known workflows; after a second Ctrl-C the closing line counts what was stored; the README's quick
question says how to learn its time on a CPU."""

import re
import shlex
from pathlib import Path

from typer.testing import CliRunner

from mlcbench.orchestrator import sweep as sweeping
from mlcbench.orchestrator.cli import app
from mlcbench.orchestrator.errors import ExitCode
from mlcbench.orchestrator.store import Store
from tests.orchestrator.stores import JOB, tagged

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]


def plan(tmp_path: Path, *words: str):
    done = runner.invoke(app, ["sweep", *words, "--gpu", "cpu", "--plan", "--db", str(tmp_path / "s.db"),
                               "--workdir", str(tmp_path / "w"), "--cache-dir", str(tmp_path / "c")])
    assert done.exit_code == 0, done.output
    return done.output


def test_planning_the_paper_suite_on_a_cpu_says_it_is_meant_for_a_gpu(tmp_path):
    assert "suite paper is meant for a GPU" in plan(tmp_path, "--suite", "paper")
    assert "meant for a GPU" not in plan(tmp_path, "--suite", "smoke")


def test_the_readme_s_quick_question_says_how_to_learn_its_time_on_a_cpu(tmp_path):
    readme = (REPO / "README.md").read_text()
    [command] = re.findall(r"For a quick question the grid comes from the command line:\n`(mlcbench sweep [^`]+)`",
                           readme)
    paragraph = readme[readme.index(command):].split("\n\n")[0]
    assert "On a CPU" in paragraph and "`--plan`" in paragraph
    assert "estimated wall time" in plan(tmp_path, *shlex.split(command)[2:])


def test_a_typo_in_a_read_command_s_workflow_filter_is_refused_naming_the_known_ones(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    store.put(tagged(JOB))
    for command in (["results"], ["export"], ["report"]):
        done = runner.invoke(app, [*command, "--workflow", "torch_compil", "--db", str(tmp_path / "s.db")])
        assert done.exit_code == ExitCode.USAGE, done.output
        assert "unknown workflow 'torch_compil'" in done.stderr and "torch_compile," in done.stderr
        assert "no stored results match" not in done.output


def test_after_a_second_ctrl_c_the_closing_line_counts_the_cells_stored_ok(tmp_path, monkeypatch):
    def stored_two_then_killed(options, store, listener, stop):
        store.put(tagged(JOB), sweep_id=options.sweep_id)
        store.put(tagged(JOB.model_copy(update={"batch_size": 2})), sweep_id=options.sweep_id)
        store.put(tagged(JOB.model_copy(update={"batch_size": 4})), sweep_id="an earlier sweep")
        raise KeyboardInterrupt

    monkeypatch.setattr(sweeping, "run", stored_two_then_killed)
    done = runner.invoke(app, ["sweep", "--suite", "tiny", "--db", str(tmp_path / "s.db"),
                               "--workdir", str(tmp_path / "w")])

    assert done.exit_code == ExitCode.INTERRUPTED, done.output
    assert "2 ok · 0 unsupported" in done.stdout
