"""A Markdown report shows stored names as text: their raw HTML does not render, their terminal escapes do not act."""

from mlcbench.orchestrator.reports.markdown import markdown
from mlcbench.orchestrator.reports.report import build_report
from mlcbench.orchestrator.reports.selection import Selection
from mlcbench.schema import MODELS
from tests.reports.test_verdicts import EAGER, cell

HTML_NAME = '<img src=x onerror="alert(1)">'
ANSI_NAME = "\x1b[31mred\x1b[0m"  # a store written before names were checked


def named(name: str, workflow: str):
    result = cell("tinyllama-1.1b", workflow, EAGER)
    job = result.job.model_copy(update={"model": name, "model_info": MODELS["tinyllama-1.1b"]})  # unchecked, as an
    # older store may hold it
    return result.model_copy(update={"job": job})


def test_names_raw_html_and_ansi_escapes_are_written_out():
    results = [named(name, workflow) for name in (HTML_NAME, ANSI_NAME) for workflow in ("eager", "torch_compile")]

    text = markdown(build_report(results, "test", Selection()))

    assert "<img" not in text and "\x1b" not in text
    assert '&lt;img src=x onerror="alert(1)"&gt;' in text and "\\x1b\\[31mred" not in text
    assert "\\x1b[31mred\\x1b[0m" in text
