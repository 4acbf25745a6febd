"""Flat rows, one per stored result, for spreadsheets and dataframes (CSV, JSON, Parquet)."""

import csv
import io
import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Literal, Optional

from mlcbench.orchestrator.reports.data import env_of, gpu_of
from mlcbench.schema import Result

Format = Literal["csv", "json", "parquet"]


@dataclass(frozen=True)
class FlatRow:
    gpu: str
    env: str
    model: str
    workflow: str
    precision: str
    batch: int
    status: str
    reason: Optional[str]
    tokens_per_s: Optional[float]
    ttft_ms: Optional[float]
    tpot_ms: Optional[float]
    tflops: Optional[float]
    peak_fraction: Optional[float]
    bandwidth_fraction: Optional[float]
    median_ms: Optional[float]
    p10_ms: Optional[float]
    p90_ms: Optional[float]
    cv: Optional[float]
    ci_low_ms: Optional[float]
    ci_high_ms: Optional[float]
    cv_between: Optional[float]
    processes: Optional[int]
    converged: Optional[bool]
    throttled: bool
    cell_settings: str
    sweep_id: Optional[str]
    compile_s: Optional[float]
    load_s: Optional[float]
    peak_mem_bytes: Optional[int]
    correct: Optional[bool]
    cosine: Optional[float]
    rel_l2_error: Optional[float]
    token_agreement: Optional[float]
    graph_breaks: Optional[int]
    recompiles: Optional[int]
    torch: Optional[str]
    transformers: Optional[str]
    gpu_name: Optional[str]
    driver: Optional[str]
    git_rev: Optional[str]
    image_digest: Optional[str]
    started_at: Optional[str]  # ISO 8601
    job_id: str


COLUMNS = tuple(field.name for field in fields(FlatRow))


def flat_row(result: Result) -> FlatRow:
    job, metrics, check, provenance = result.job, result.metrics, result.correctness, result.provenance
    latency, gpu = metrics.latency, provenance.gpu
    return FlatRow(
        gpu=gpu_of(result), env=env_of(result), model=job.model, workflow=job.workflow, precision=job.precision,
        batch=job.batch_size, status=result.status, reason=result.reason, tokens_per_s=metrics.tokens_per_s,
        ttft_ms=metrics.ttft_ms, tpot_ms=metrics.tpot_ms, tflops=metrics.tflops, peak_fraction=metrics.peak_fraction,
        bandwidth_fraction=metrics.bandwidth_fraction, median_ms=latency.median_ms if latency else None,
        p10_ms=latency.p10_ms if latency else None, p90_ms=latency.p90_ms if latency else None,
        cv=latency.cv if latency else None, ci_low_ms=latency.ci_low_ms if latency else None,
        ci_high_ms=latency.ci_high_ms if latency else None, cv_between=latency.cv_between if latency else None,
        processes=len(latency.processes) if latency else None, converged=latency.converged if latency else None,
        throttled=provenance.throttled, cell_settings=job.cell_settings, sweep_id=provenance.sweep_id, compile_s=metrics.compile_s, load_s=metrics.load_s,
        peak_mem_bytes=metrics.peak_mem_bytes, correct=check.passed if check else None,
        cosine=check.cosine if check else None, rel_l2_error=check.rel_l2_error if check else None,
        token_agreement=check.token_agreement if check else None, graph_breaks=metrics.graph_breaks,
        recompiles=metrics.recompiles, torch=provenance.packages.get("torch"),
        transformers=provenance.packages.get("transformers"), gpu_name=gpu.name if gpu else None,
        driver=gpu.driver if gpu else None, git_rev=provenance.git_rev, image_digest=provenance.image_digest,
        started_at=provenance.started_at.isoformat() if provenance.started_at else None, job_id=result.job_id)


def to_csv(results: list[Result]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(asdict(flat_row(result)) for result in results)
    return buffer.getvalue()


def to_json(results: list[Result]) -> str:
    """The flat row of each result, with the whole Result under "result" (provenance, settings, log tail)."""
    return json.dumps([asdict(flat_row(r)) | {"result": r.model_dump(mode="json")} for r in results], indent=1) + "\n"


def write_parquet(results: list[Result], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [asdict(flat_row(result)) for result in results]
    # explicit types: a column that is empty in every row would otherwise have no type
    types = _arrow_types()
    schema = pa.schema([(name, types[name]) for name in COLUMNS])
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)


def _arrow_types() -> dict[str, object]:
    import pyarrow as pa

    by_annotation = {str: pa.string(), Optional[str]: pa.string(), int: pa.int64(), Optional[int]: pa.int64(),
                     Optional[float]: pa.float64(), bool: pa.bool_(), Optional[bool]: pa.bool_()}
    return {field.name: by_annotation[field.type] for field in fields(FlatRow)}
