"""Rich tables of results."""

from typing import Iterable, Optional

from rich.table import Table

from mlcbench.schema import Result


STATUS_STYLE = {"ok": "green", "unsupported": "dim", "failed": "red", "oom": "magenta", "timeout": "yellow",
                "crashed": "red bold"}


def _num(value: Optional[float], digits: int = 2) -> str:
    return "" if value is None else f"{value:,.{digits}f}"


def results_table(results: Iterable[Result], title: str = "results") -> Table:
    table = Table(title=title, show_lines=False)
    for name, justify in [("gpu", "left"), ("env", "left"), ("model", "left"), ("workflow", "left"),
                          ("prec", "left"), ("batch", "right"), ("status", "left"), ("median ms", "right"),
                          ("TFLOPS / tok/s", "right"), ("compile s", "right"), ("correct", "left"),
                          ("reason", "left")]:
        table.add_column(name, justify=justify, overflow="fold")
    for result in results:
        metrics, job = result.metrics, result.job
        throughput = (f"{_num(metrics.tokens_per_s, 1)} tok/s" if metrics.tokens_per_s is not None
                      else f"{_num(metrics.tflops, 3)} TF" if metrics.tflops is not None else "")
        correct = "" if result.correctness is None else ("yes" if result.correctness.passed else "[red]NO[/]")
        style = STATUS_STYLE.get(result.status, "")
        table.add_row(
            result.provenance.gpu_tag or "", result.provenance.env or "", job.model, job.workflow, job.precision,
            str(job.batch_size), f"[{style}]{result.status}[/]",
            _num(metrics.latency.median_ms if metrics.latency else None, 3), throughput, _num(metrics.compile_s),
            correct, (result.reason or "")[:80],
        )
    return table
