"""Fold result stores together: one row per (job, env, GPU tag), the newest run (by ended_at) wins."""

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Optional

from mlcbench.orchestrator.store import Store
from mlcbench.schema import Result


@dataclass
class MergeCounts:
    new: int = 0
    replaced: int = 0
    identical: int = 0
    older: int = 0  # already in the target with a newer (or equally new, different) run: left as it is

    def describe(self) -> str:
        return (f"{self.new} new, {self.replaced} replaced by a newer run, {self.identical} identical, "
                f"{self.older} skipped (the target's run is newer)")


def _key(result: Result) -> tuple[str, str, str]:
    return (result.job_id, result.provenance.env or "?", result.provenance.gpu_tag or "?")


def _ended(result: Result) -> datetime:
    ended = result.provenance.ended_at
    if ended is None:
        return datetime.min.replace(tzinfo=timezone.utc)
    return ended if ended.tzinfo else ended.replace(tzinfo=timezone.utc)


def merge(sources: list[Store], target: Store) -> MergeCounts:
    current: dict[tuple[str, str, str], Result] = {_key(r): r for r in (row.result() for row in target.rows())}
    counts = MergeCounts()
    for source in sources:
        for incoming in (row.result() for row in source.rows()):
            key = _key(incoming)
            existing: Optional[Result] = current.get(key)
            if existing is None:
                counts.new += 1
            elif existing == incoming:
                counts.identical += 1
                continue
            elif _ended(incoming) > _ended(existing):
                counts.replaced += 1
            else:
                counts.older += 1
                continue
            target.put(incoming)
            current[key] = incoming
    return counts
