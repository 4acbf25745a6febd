"""Property-based checks of the boundary models: JSON round trips, job_id stability, and refusal of what is not a
job (unknown fields, values out of range, arbitrary bytes)."""

import json

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from mlcbench.orchestrator.runtimes.follower import parse_result_line
from mlcbench.schema import MODELS, WORKFLOWS, JobSpec, Result
from mlcbench.schema.legacy import RetiredRepetition
from mlcbench.workers.exchange import JobFileError, read_jobs

PROPERTY_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

options = st.fixed_dictionaries({}, optional={
    "compile_mode": st.sampled_from(["default", "reduce-overhead", "max-autotune"]), "io_binding": st.booleans(),
    "min_block_size": st.integers(1, 100), "fp32_accumulation": st.booleans(), "pdl": st.booleans(),
    "triton_gemm": st.booleans()})


def _job(workflow: str, options: dict, **fields) -> JobSpec:
    """A job of the workflow with those of the options it reads; one built on another (handtuned_decode) sets one of
    its own options, as it must."""
    info = WORKFLOWS[workflow]
    own = info.own_options()[:1] if info.builds_on else ()
    read = {name: value for name, value in options.items() if name in info.options.model_fields}
    return JobSpec(workflow=workflow, options={**read, **{name: True for name in own}}, **fields)


jobs = st.builds(
    _job, model=st.sampled_from(sorted(MODELS)), workflow=st.sampled_from(sorted(WORKFLOWS)),
    precision=st.sampled_from(["fp32", "fp16", "bf16"]), batch_size=st.integers(1, 4096),
    input_len=st.integers(1, 8192), output_len=st.integers(1, 8192), warmup=st.integers(0, 1000),
    repeats=st.integers(1, 10000), timeout_s=st.floats(0.001, 86400), device=st.sampled_from(["cuda", "cpu"]),
    seed=st.integers(-2**63, 2**63 - 1), options=options, model_path=st.none() | st.text(max_size=50))
statuses = st.sampled_from(["ok", "unsupported", "failed", "oom", "timeout", "crashed"])
# one replacement per JobSpec field, each a valid value that differs from any other
CHANGES = {
    "model": lambda job: next(name for name in sorted(MODELS) if name != job.model),
    # another workflow that reads the same options (none for the decode workflows: such a job draws again)
    "workflow": lambda job: next((name for name in sorted(WORKFLOWS)
                                  if name != job.workflow and WORKFLOWS[name].options is type(job.options)), None),
    "precision": lambda job: "fp16" if job.precision != "fp16" else "bf16",
    "batch_size": lambda job: job.batch_size % 4096 + 1,
    "input_len": lambda job: job.input_len % 8192 + 1,
    "output_len": lambda job: job.output_len % 8192 + 1,
    "warmup": lambda job: (job.warmup + 1) % 1001,
    "repeats": lambda job: job.repeats % 10000 + 1,
    "device": lambda job: "cpu" if job.device == "cuda" else "cuda",
    "seed": lambda job: job.seed + 1 if job.seed < 2**63 - 1 else 0,
    "options": lambda job: {"workflow": "onnxruntime",
                            "options": {"io_binding": not getattr(job.options, "io_binding", True)}},
    "model_path": lambda job: (job.model_path or "") + "/x",
    "model_info": lambda job: job.info.model_copy(update={"hidden_size": job.info.hidden_size + 1}),
    "repetition": lambda job: job.repetition.model_copy(update={"processes": job.repetition.processes % 100 + 1}),
    "retired_repetition": lambda job: RetiredRepetition(max_processes=100, max_s=1.0),
}


def changed(job: JobSpec, field: str) -> JobSpec:
    """The job with the field changed, validated as a worker would see it."""
    change = CHANGES[field](job)
    assume(change is not None)
    update = change if field == "options" else {field: change}
    return JobSpec.model_validate_json(job.model_copy(update=update).model_dump_json())
# what names a cell in a table (its row and column); every other field is a setting of the cell
CELL_COORDINATES = {"model", "workflow", "precision", "batch_size"}
OUT_OF_RANGE = {"batch_size": [0, 4097, -1], "input_len": [0, 8193], "output_len": [0], "warmup": [-1, 1001],
                "repeats": [0, 10001], "timeout_s": [0, -1.0, 86401], "precision": ["fp8"], "device": ["tpu"],
                "model": ["no-such-model"], "workflow": ["torch_compiled", ""], "schema_version": [2]}


def test_every_jobspec_field_but_the_timeout_has_a_change_here():
    assert set(CHANGES) == set(JobSpec.model_fields) - {"timeout_s", "schema_version"}


@PROPERTY_SETTINGS
@given(jobs)
def test_jobspec_round_trips_through_json_with_the_same_id(job):
    again = JobSpec.model_validate_json(job.model_dump_json())
    assert again == job and again.job_id == job.job_id


@PROPERTY_SETTINGS
@given(jobs, st.sampled_from(sorted(CHANGES)), st.floats(0.001, 86400))
def test_job_id_changes_with_any_field_but_the_timeout(job, field, timeout_s):
    assert changed(job, field).job_id != job.job_id
    assert job.model_copy(update={"timeout_s": timeout_s}).job_id == job.job_id


@PROPERTY_SETTINGS
@given(jobs, st.sampled_from(sorted(CHANGES)), st.floats(0.001, 86400))
def test_runs_with_different_settings_never_share_a_cell(job, field, timeout_s):
    other = changed(job, field)
    assert (other.cell_settings == job.cell_settings) == (field in CELL_COORDINATES)
    assert (other.baseline_settings == job.baseline_settings) == (field in CELL_COORDINATES | {"options"})
    assert job.model_copy(update={"timeout_s": timeout_s}).cell_settings == job.cell_settings


@PROPERTY_SETTINGS
@given(jobs, statuses, st.none() | st.text(max_size=200), st.none() | st.integers(-255, 255))
def test_result_round_trips_through_json(job, status, reason, exit_code):
    result = Result.without_run(job, status, reason or "", exit_code=exit_code, log_tail=reason)
    assert Result.model_validate_json(result.model_dump_json()) == result


@PROPERTY_SETTINGS
@given(jobs, st.text(min_size=1, max_size=20), st.integers() | st.text() | st.none())
def test_unknown_fields_are_refused(job, name, value):
    assume(name not in JobSpec.model_fields)
    data = {**json.loads(job.model_dump_json()), name: value}
    with pytest.raises(ValidationError) as refused:
        JobSpec.model_validate(data)
    assert refused.value.errors()[0]["type"] == "extra_forbidden"
    assert refused.value.errors()[0]["loc"] == (name,)


@PROPERTY_SETTINGS
@given(jobs, st.sampled_from([(field, bad) for field, values in OUT_OF_RANGE.items() for bad in values]))
def test_out_of_range_values_are_refused_naming_the_field(job, case):
    field, bad = case
    data = {**json.loads(job.model_dump_json()), field: bad}
    with pytest.raises(ValidationError) as refused:
        JobSpec.model_validate_json(json.dumps(data))
    assert refused.value.errors()[0]["loc"][0] == field


@PROPERTY_SETTINGS
@given(st.binary(max_size=2000) | st.lists(st.sampled_from([b"{", b"}", b"[", b'"model"', b":", b",", b"\n", b"\xff",
                                                            b'"matmul-small"', b"1", b"null", b"\\u2028"]))
       .map(b"".join))
def test_read_jobs_raises_only_job_file_errors_on_arbitrary_bytes(tmp_path, data):
    path = tmp_path / "jobs.jsonl"
    path.write_bytes(data)
    try:
        jobs_read = read_jobs(path)
    except JobFileError as error:
        assert str(error).startswith(str(path))
    else:
        assert all(isinstance(job, JobSpec) for job in jobs_read)


@PROPERTY_SETTINGS
@given(jobs, st.text(max_size=300))
def test_a_result_line_that_does_not_parse_becomes_a_failed_result_keeping_the_text(job, line):
    result = parse_result_line(line, job)
    assume(result.status == "failed")
    assert result.job_id == job.job_id and result.error == line[:4000]


@PROPERTY_SETTINGS
@given(jobs, jobs)
def test_a_result_for_another_job_is_never_stored_as_the_job_due(job, other):
    assume(job.job_id != other.job_id)
    line = Result(job_id=other.job_id, job=other, status="ok").model_dump_json()
    result = parse_result_line(line, job)
    assert (result.status, result.job_id, result.error) == ("failed", job.job_id, line[:4000])
