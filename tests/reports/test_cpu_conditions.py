"""A CPU figure carries its conditions: the worker fixes torch's intra-op threads and records them with the machine's
load at both edges of the timed calls; a figure taken while the host was oversubscribed is flagged in the report and
in `mlcbench results`."""

import torch
from rich.console import Console

from mlcbench.orchestrator.reports.data import perf_rows
from mlcbench.orchestrator.reports.tables import compact_table, wide_table
from mlcbench.schema import JobSpec, Result
from mlcbench.workers.measurement.probes import host_cpus
from mlcbench.workers.runner import run_job
from tests.reports.test_verdicts import EAGER, cell


def test_a_cpu_process_records_its_threads_set_by_the_worker_and_the_load_at_both_edges(tmp_path):
    threads = torch.get_num_threads()
    torch.set_num_threads(1 if host_cpus() > 1 else 2)  # not what the worker sets
    try:
        result = run_job(JobSpec(model="ffn-small", workflow="eager", precision="fp32", batch_size=1, device="cpu",
                                 warmup=0, repeats=2), tmp_path)
    finally:
        torch.set_num_threads(threads)

    assert result.status == "ok", result.error
    [process] = result.metrics.latency.processes
    assert process.cpu_threads == host_cpus()
    assert len(process.host_load) == 2 and all(load >= 0 for load in process.host_load)


def loaded(result: Result, loads: list[float]) -> Result:
    latency = result.metrics.latency
    processes = [process.model_copy(update={"host_load": loads, "cpu_threads": 2}) for process in latency.processes]
    return result.model_copy(update={"metrics": result.metrics.model_copy(update={
        "latency": latency.model_copy(update={"processes": processes})})})


def text(table) -> str:
    console = Console(width=300, record=True)
    console.print(table)
    return console.export_text()


def test_a_figure_taken_on_an_oversubscribed_host_is_flagged_in_the_report_and_the_results():
    busy = loaded(cell("ffn-tinyllama", "eager", EAGER, device_kind="cpu"), [0.4, 1.8])
    quiet = loaded(cell("ffn-tinyllama", "torch_compile", EAGER, device_kind="cpu"), [0.4, 0.9])

    flags = {row.workflow: row.flags() for row in perf_rows([busy, quiet])}

    assert "host oversubscribed (load 1.8 per CPU)" in flags["eager"]
    assert not any("oversubscribed" in flag for flag in flags["torch_compile"])
    for table in (wide_table, compact_table):
        shown = text(table([busy, quiet], "results"))
        assert shown.count("host oversubscribed (load 1.8 per CPU)") == 1, shown
