"""A figure draws one line per cell group (workflow, env, precision, lengths, options, weights): never a line that
joins cells which are not the same, each legend entry saying what its own points are; and every figure has a file of
its own, whatever its model's name."""

from pathlib import Path

from mlcbench.orchestrator.reports import figures
from mlcbench.orchestrator.reports.report import build_report
from mlcbench.orchestrator.reports.selection import Selection
from mlcbench.schema import MODELS, Result
from tests.reports.test_verdicts import EAGER, cell


def as_job(result: Result, **changes) -> Result:
    job = result.job.model_copy(update=changes)
    return result.model_copy(update={"job": job, "job_id": job.job_id})


def drawn_lines(results: list[Result], tmp_path: Path, monkeypatch) -> dict[str, list[float]]:
    drawn = []
    monkeypatch.setattr(figures, "_save", lambda figure, out_dir, filename: drawn.append(figure))
    figures.write_figures(build_report(results, "test", Selection()), tmp_path)
    [figure] = [figure for figure in drawn if figure.axes[0].get_ylabel() == "tokens/s"]
    axes = figure.axes[0]
    return {line.get_label(): list(line.get_xdata()) for line in axes.get_lines()
            if not line.get_label().startswith("_")}


def test_cells_of_other_precisions_and_lengths_are_other_lines(tmp_path, monkeypatch):
    """The README's qwen2-tiny grid (bf16, 32/32, 3 processes) and own-models.toml (fp32, 16/8, 1 process) drew one
    eager line through both, its legend "n=1: no verdict" though the bf16 points had n=3."""
    grid = [as_job(cell("tinyllama-1.1b", "eager", EAGER, batch=batch), input_len=32, output_len=32)
            for batch in (1, 8)]
    own = [as_job(cell("tinyllama-1.1b", "eager", [10.0], batch=batch), precision="fp32", input_len=16, output_len=8)
           for batch in (1, 2)]

    lines = drawn_lines(grid + own, tmp_path, monkeypatch)

    assert lines == {"eager bf16 32/32 in/out": [1, 8], "eager fp32 16/8 in/out (n=1: no verdict)": [1, 2]}


def test_cells_of_other_weights_are_other_lines(tmp_path, monkeypatch):
    random = [cell("tinyllama-1.1b", "eager", EAGER, batch=batch) for batch in (1, 4)]
    trained = [as_job(result, model_path="/ckpt/tinyllama") for result in random]

    lines = drawn_lines(random + trained, tmp_path, monkeypatch)

    assert lines == {"eager random weights": [1, 4], "eager weights /ckpt/tinyllama": [1, 4]}


def test_every_model_name_gets_a_figure_file_of_its_own(tmp_path):
    names = ["Tiny.A", "tiny_a", "模型-ü", "🚀🚀", "tinyllama-1.1b"]
    results = [as_job(cell("tinyllama-1.1b", "eager", EAGER), model=name, model_info=MODELS["tinyllama-1.1b"])
               for name in names]

    written = figures.write_figures(build_report(results, "test", Selection()), tmp_path)

    assert len({figure.filename for figure in written}) == len(names)
    assert len(list(tmp_path.glob("*.png"))) == len(names)
    assert "llm-tinyllama-1-1b-h100.png" in {figure.filename for figure in written}  # a plain name stays readable
