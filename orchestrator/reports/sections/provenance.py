"""Provenance: where the numbers of each env on each GPU come from (several values: the runs differ)."""

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Iterable, Optional

from mlcbench.orchestrator.reports.data import KEY_PACKAGES, env_of, gpu_of
from mlcbench.orchestrator.reports.table import Column, Section, table_section, text_cells
from mlcbench.schema import Result


@dataclass(frozen=True)
class ProvenanceRow:
    """Where the numbers of one env on one GPU come from. Several values mean the runs differ."""

    gpu: str
    env: str
    results: int
    gpu_names: tuple[str, ...]
    drivers: tuple[str, ...]
    image_digests: tuple[str, ...]
    packages: tuple[tuple[str, tuple[str, ...]], ...]  # (package, versions)
    pythons: tuple[str, ...]
    git_revs: tuple[str, ...]
    first_started: Optional[datetime]
    last_ended: Optional[datetime]


def _distinct(values: Iterable[Optional[str]]) -> tuple[str, ...]:
    return tuple(sorted({value for value in values if value}))


def provenance_rows(results: Iterable[Result]) -> list[ProvenanceRow]:
    groups: dict[tuple[str, str], list[Result]] = defaultdict(list)
    for result in results:
        groups[(gpu_of(result), env_of(result))].append(result)
    rows = []
    for (gpu, env), members in sorted(groups.items()):
        provenances = [r.provenance for r in members]
        package_names = sorted({name for p in provenances for name in p.packages},
                               key=lambda n: (KEY_PACKAGES.index(n) if n in KEY_PACKAGES else len(KEY_PACKAGES), n))
        starts = [p.started_at for p in provenances if p.started_at]
        ends = [p.ended_at for p in provenances if p.ended_at]
        rows.append(ProvenanceRow(
            gpu=gpu, env=env, results=len(members),
            gpu_names=_distinct(p.gpu.name if p.gpu else None for p in provenances),
            drivers=_distinct(p.gpu.driver if p.gpu else None for p in provenances),
            image_digests=_distinct(p.image_digest for p in provenances),
            packages=tuple((name, _distinct(p.packages.get(name) for p in provenances)) for name in package_names),
            pythons=_distinct(p.python for p in provenances), git_revs=_distinct(p.git_rev for p in provenances),
            first_started=min(starts) if starts else None, last_ended=max(ends) if ends else None))
    return rows


COLUMNS = (Column("gpu"), Column("env"), Column("results", numeric=True), Column("GPU name"), Column("driver"),
           Column("image digest"), Column("packages"), Column("python"), Column("git rev"), Column("first run (UTC)"),
           Column("last run (UTC)"))


def _when(moment: Optional[datetime]) -> str:
    return f"{moment:%Y-%m-%d %H:%M}" if moment else "—"


def provenance_section(rows: Iterable[ProvenanceRow]) -> Optional[Section]:
    return table_section("Provenance", "per env and GPU (several values: the runs differ)", COLUMNS, tuple(text_cells(
        p.gpu, p.env, str(p.results), "; ".join(p.gpu_names), ", ".join(p.drivers),
        ", ".join(p.image_digests) or "none (local)",
        "; ".join(f"{name} {', '.join(versions)}" for name, versions in p.packages), ", ".join(p.pythons),
        ", ".join(p.git_revs) or "unknown", _when(p.first_started), _when(p.last_ended)) for p in rows))
