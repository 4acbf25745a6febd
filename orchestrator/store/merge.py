"""Fold result stores together: every attempt of every source joins the target's history (an attempt the target
already holds is not added twice), in one transaction. The result of each cell then follows the store's rule, so
another host's crash never hides a good result."""

from dataclasses import dataclass

from mlcbench.orchestrator.store import Store
from mlcbench.schema import Result


@dataclass
class MergeCounts:
    added: int = 0
    known: int = 0  # attempts the target already held
    new_cells: int = 0
    changed_cells: int = 0  # cells whose result is now another attempt
    calibrations: int = 0  # measured GPU ceilings added

    def describe(self) -> str:
        return (f"{self.added} attempt(s) added, {self.known} already there; {self.new_cells} new cell(s), "
                f"{self.changed_cells} cell(s) with another result now; {self.calibrations} GPU calibration(s)")


def _cell(result: Result) -> tuple[str, str, str]:
    return (result.job_id, result.provenance.env or "?", result.provenance.gpu_tag or "?")


def merge(sources: list[Store], target: Store) -> MergeCounts:
    before = {_cell(result): result for result in target.cells()}
    seen = {result.model_dump_json() for result in target.history()}
    measured = {calibration.model_dump_json() for calibration in target.calibrations()}
    attempts, calibrations, counts = [], [], MergeCounts()
    for source in sources:
        for row, result in source.attempts():
            text = result.model_dump_json()
            if text in seen:
                counts.known += 1
                continue
            seen.add(text)
            attempts.append((result, row.sweep_id))
        for calibration in source.calibrations():  # the ceilings the sources' sweeps measured, once each
            if calibration.model_dump_json() not in measured:
                measured.add(calibration.model_dump_json())
                calibrations.append(calibration)
    target.put_all(attempts, calibrations)
    counts.calibrations = len(calibrations)
    after = {_cell(result): result for result in target.cells()}
    counts.added = len(attempts)
    counts.new_cells = len(after.keys() - before.keys())
    counts.changed_cells = sum(1 for key, result in before.items() if after[key] != result)
    return counts
