"""A workflow's techniques one at a time: the cells that differ only in the techniques they ran form a ladder from
none up, each rung with its gain over the rung below (and over the base) and its interval."""

from typing import Optional

from mlcbench.orchestrator.reports.data import perf_rows
from mlcbench.orchestrator.reports.markdown import markdown
from mlcbench.orchestrator.reports.report import build_report
from mlcbench.orchestrator.reports.sections.ablation import ablations
from mlcbench.orchestrator.reports.selection import Selection
from mlcbench.schema import Applied
from mlcbench.schema.options import TorchCompileDecodeOptions
from tests.reports.test_verdicts import cell

DECODE = "torch_compile_decode"


def variant(medians: list[float], fused: Optional[bool], pdl: Optional[bool], passed: bool = True, batch: int = 1,
            prefill_graph: Optional[bool] = None):
    """A torch_compile_decode cell run with these options, recording what it applied (None: not recorded)."""
    result = cell("llama2-7b", DECODE, medians, batch=batch, passed=passed)
    options = TorchCompileDecodeOptions(fused_projections=fused is not False, pdl=bool(pdl),
                                        prefill_graph=bool(prefill_graph))
    job = result.job.model_copy(update={"options": options})
    metrics = result.metrics.model_copy(
        update={"applied": Applied(fused_projections=fused, pdl=pdl, prefill_graph=prefill_graph)})
    return result.model_copy(update={"job": job, "job_id": job.job_id, "metrics": metrics})


def test_the_ladder_climbs_from_the_base_and_each_rung_is_judged_against_the_one_below():
    base, fused, pdl = (variant([6.0, 6.06, 5.94], fused=False, pdl=False),
                        variant([5.0, 5.05, 4.95], fused=True, pdl=False),
                        variant([4.99, 5.04, 4.94], fused=True, pdl=True))
    eager = cell("llama2-7b", "eager", [60.0, 60.6, 59.4])
    [ablation] = ablations(perf_rows([pdl, eager, base, fused]))
    assert [rung.techniques for rung in ablation.rungs] == [(), ("fused_projections",), ("fused_projections", "pdl")]
    text = markdown(build_report([pdl, eager, base, fused], "test", Selection()))
    section = text[text.index("Techniques, one at a time"):]
    lines = [line for line in section.splitlines() if line.startswith("| +") or line.startswith("| base")]
    assert lines[0].startswith("| base") and lines[0].rstrip().endswith("| — | — |")
    assert "1.20× [" in lines[1]  # fused over the base: 6.0 / 5.0, outside the noise
    # PDL ≈ fused, the same within a few % (the interval is narrow); over the base 1.20×
    assert lines[2].count("≈ [") == 1 and "(equal within" in lines[2] and "1.20× [" in lines[2]


def test_a_failed_check_claims_no_gain_and_a_short_cell_no_verdict():
    base = variant([6.0, 6.06, 5.94], fused=False, pdl=False)
    failed = variant([5.0, 5.05, 4.95], fused=True, pdl=False, passed=False)
    short = variant([4.0], fused=True, pdl=True)
    section = markdown(build_report([base, failed, short], "test", Selection()))
    section = section[section.index("Techniques, one at a time"):]
    [fused_line] = [line for line in section.splitlines() if line.startswith("| +fused_projections |")]
    assert fused_line.count("check failed: no gain") == 2  # over the row above and over the base (the same rung)
    [pdl_line] = [line for line in section.splitlines() if line.startswith("| +fused_projections +pdl |")]
    assert "check failed: no gain" in pdl_line  # over the failed rung above it
    assert pdl_line.rstrip().endswith("(n=1: no verdict) |")  # over the base: its own evidence is one process


def test_cells_whose_techniques_were_not_recorded_or_do_not_differ_make_no_ladder():
    unrecorded = variant([6.0, 6.06, 5.94], fused=None, pdl=None)  # stored before the options existed
    fused = variant([5.0, 5.05, 4.95], fused=True, pdl=False)
    assert ablations(perf_rows([unrecorded, fused])) == []
    other_batch = variant([6.0, 6.06, 5.94], fused=False, pdl=False, batch=64)
    assert ablations(perf_rows([fused, other_batch])) == []  # another batch is another ladder, of one rung


def test_a_cell_stored_before_a_later_technique_existed_stands_on_the_ladder_without_it():
    # recorded fused and PDL but not prefill_graph: stored before that option was added, so it did not use it
    before = variant([5.0, 5.05, 4.95], fused=True, pdl=True)
    graph = variant([4.0, 4.04, 3.96], fused=True, pdl=True, prefill_graph=True)
    [ablation] = ablations(perf_rows([graph, before]))
    assert [rung.techniques for rung in ablation.rungs] == [("fused_projections", "pdl"),
                                                             ("fused_projections", "pdl", "prefill_graph")]
