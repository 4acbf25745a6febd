"""Flat rows, one per stored result, for spreadsheets and dataframes (CSV, JSON, Parquet)."""

import csv
import io
import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Literal, Optional

from mlcbench.orchestrator.reports.data import (energy_of, env_of, gpu_of, hand_written, implausible, joules_per_unit,
                                                kind_of, no_verdict, processes_of, spec_fraction, throttled_during)
from mlcbench.schema import Result

Format = Literal["csv", "json", "parquet"]


@dataclass(frozen=True)
class FlatRow:
    gpu: str
    env: str
    model: str
    weights: str  # a checkpoint folder, or seeded random weights
    workflow: str
    # a reference row of mlcbench's own kernels (the catalog's hand_written), not a compiler's output
    hand_written: bool
    options: str  # JSON: the options the job set away from their defaults
    applied: str  # JSON: what the workflow recorded it applied (techniques, backend, cache, ...)
    precision: str
    batch: int
    status: str
    reason: Optional[str]
    tokens_per_s: Optional[float]
    ttft_ms: Optional[float]
    tpot_ms: Optional[float]
    tflops: Optional[float]
    peak_fraction: Optional[float]
    bandwidth_fraction: Optional[float]  # as stored: the synchronised time per output token's
    step_ms: Optional[float]  # LLM: per decode step of the timed calls, over processes, with its 95 % interval
    step_ci_low_ms: Optional[float]
    step_ci_high_ms: Optional[float]
    step_bandwidth_fraction: Optional[float]  # the reports' % of the decode bound: from step_ms
    median_ms: Optional[float]
    p10_ms: Optional[float]
    p90_ms: Optional[float]
    cv: Optional[float]
    ci_low_ms: Optional[float]
    ci_high_ms: Optional[float]
    cv_between: Optional[float]
    processes: Optional[int]
    series: Optional[str]  # the processes the figure combines: warm, cold or pooled
    device_median_ms: Optional[float]  # synthetic: the GPU time of one call without the host's launch cost
    device_ci_low_ms: Optional[float]
    device_ci_high_ms: Optional[float]
    device_method: Optional[str]
    # the GPU's energy over the timed calls (NVML's counter at the window's edges), over the figure's processes that
    # gave one, each with its 95 % interval; energy_reason: why none did
    energy_method: Optional[str]
    energy_processes: Optional[int]
    joules_per_call: Optional[float]
    joules_per_call_ci_low: Optional[float]
    joules_per_call_ci_high: Optional[float]
    joules_per_token: Optional[float]  # LLM: per generated token (batch x output_len a call)
    joules_per_token_ci_low: Optional[float]
    joules_per_token_ci_high: Optional[float]
    power_w: Optional[float]
    power_ci_low_w: Optional[float]
    power_ci_high_w: Optional[float]
    temperature_start_c: Optional[float]  # mean over processes, at the window's first edge
    temperature_end_c: Optional[float]
    power_check_ratio: Optional[float]  # nvmlDeviceGetPowerUsage x time over the same window / the counter's joules
    energy_reason: Optional[str]
    no_verdict: Optional[str]  # why the figure cannot carry a verdict (n=1, check failed, ...); empty: it can
    converged: Optional[bool]
    throttled: bool  # NVML reported a slowdown while the timed calls ran
    cell_settings: str
    sweep_id: Optional[str]
    compile_s: Optional[float]
    compile_cold_s: Optional[float]  # median over the cell's processes that compiled into empty caches
    compile_cold_n: Optional[int]
    compile_warm_s: Optional[float]
    compile_warm_n: Optional[int]
    load_s: Optional[float]
    compiler_import_s: Optional[float]
    peak_mem_bytes: Optional[int]
    correct: Optional[bool]
    processes_checked: Optional[int]
    processes_failed: Optional[int]
    cosine: Optional[float]
    rel_l2_error: Optional[float]
    token_agreement: Optional[float]  # raw: the share of the workflow's own token choices that are eager's
    token_agreement_within_noise: Optional[float]  # eager's, or within eager's numerical noise there
    tokens_beyond_noise: Optional[int]
    timed_calls_failed: Optional[int]  # timed calls whose own output differed from the checked call's
    input_sets: Optional[int]  # seeded inputs cycled through the timed calls, each with its own checked call
    timed_tokens: Optional[int]  # LLM: tokens the timed calls generated, over the cell's processes
    timed_tokens_compared: Optional[int]  # of those, compared with their prompt's checked call (< 90 %: not checked)
    implausible: Optional[str]  # why the figure cannot have been measured (over a bound)
    identical_to_reference: Optional[bool]  # every logit bit-identical to eager's (suspect: the check failed)
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


def _energy_columns(result: Result) -> dict[str, object]:
    energy, per_unit = energy_of(result), joules_per_unit(result)
    per_call, power = (energy.joules_per_call, energy.power_w) if energy else (None, None)
    per_token = per_unit[0] if per_unit is not None and per_unit[1] == "J/token" else None
    start, end, check = ((energy.temperature_start_c, energy.temperature_end_c, energy.sampled_ratio) if energy
                         else (None, None, None))
    return dict(
        energy_method=energy.method if energy else None, energy_processes=energy.processes if energy else None,
        joules_per_call=per_call.value if per_call else None, joules_per_call_ci_low=per_call.low if per_call else None,
        joules_per_call_ci_high=per_call.high if per_call else None,
        joules_per_token=per_token.value if per_token else None,
        joules_per_token_ci_low=per_token.low if per_token else None,
        joules_per_token_ci_high=per_token.high if per_token else None,
        power_w=power.value if power else None, power_ci_low_w=power.low if power else None,
        power_ci_high_w=power.high if power else None, temperature_start_c=start.value if start else None,
        temperature_end_c=end.value if end else None, power_check_ratio=check.value if check else None,
        energy_reason=energy.reason if energy else None)


def flat_row(result: Result) -> FlatRow:
    job, metrics, check, provenance = result.job, result.metrics, result.correctness, result.provenance
    latency, gpu = metrics.latency, provenance.gpu
    cold, warm = metrics.compile_cold, metrics.compile_warm
    return FlatRow(
        gpu=gpu_of(result), env=env_of(result), model=job.model, weights=job.weights, workflow=job.workflow,
        hand_written=hand_written(job.workflow), options=job.options.model_dump_json(exclude_defaults=True),
        applied=metrics.applied.model_dump_json(exclude_defaults=True), precision=job.precision,
        batch=job.batch_size, status=result.status, reason=result.reason, tokens_per_s=metrics.tokens_per_s,
        ttft_ms=metrics.ttft_ms, tpot_ms=metrics.tpot_ms, tflops=metrics.tflops, peak_fraction=metrics.peak_fraction,
        bandwidth_fraction=metrics.bandwidth_fraction, step_ms=latency.step_median_ms if latency else None,
        step_ci_low_ms=latency.step_ci_low_ms if latency else None,
        step_ci_high_ms=latency.step_ci_high_ms if latency else None,
        step_bandwidth_fraction=spec_fraction(result) if kind_of(job) == "llm" else None,
        median_ms=latency.median_ms if latency else None,
        p10_ms=latency.p10_ms if latency else None, p90_ms=latency.p90_ms if latency else None,
        cv=latency.cv if latency else None, ci_low_ms=latency.ci_low_ms if latency else None,
        ci_high_ms=latency.ci_high_ms if latency else None, cv_between=latency.cv_between if latency else None,
        processes=processes_of(result) if latency else None, series=latency.series if latency else None,
        device_median_ms=latency.device_median_ms if latency else None,
        device_ci_low_ms=latency.device_ci_low_ms if latency else None,
        device_ci_high_ms=latency.device_ci_high_ms if latency else None,
        device_method=latency.device_method if latency else None, **_energy_columns(result),
        no_verdict=no_verdict(result),
        converged=latency.converged if latency else None, throttled=throttled_during(result),
        cell_settings=job.cell_settings, sweep_id=provenance.sweep_id, compile_s=metrics.compile_s,
        compile_cold_s=cold.median_s if cold else None, compile_cold_n=cold.n if cold else None,
        compile_warm_s=warm.median_s if warm else None, compile_warm_n=warm.n if warm else None, load_s=metrics.load_s,
        compiler_import_s=metrics.compiler_import_s, peak_mem_bytes=metrics.peak_mem_bytes,
        correct=check.passed if check else None,
        processes_checked=check.processes_checked if check else None,
        processes_failed=check.processes_failed if check else None,
        cosine=check.cosine if check else None, rel_l2_error=check.rel_l2_error if check else None,
        token_agreement=check.token_agreement if check else None,
        token_agreement_within_noise=check.token_agreement_within_noise if check else None,
        timed_calls_failed=check.timed_calls_failed if check else None,
        input_sets=check.input_sets if check else None, timed_tokens=check.timed_tokens if check else None,
        timed_tokens_compared=check.timed_tokens_compared if check else None, implausible=implausible(result),
        identical_to_reference=check.identical_to_reference if check else None,
        tokens_beyond_noise=check.tokens_beyond_noise if check else None, graph_breaks=metrics.graph_breaks,
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
