"""The shapes earlier versions stored jobs in (schema/legacy.py): every committed study's results read back with the
job ids they were stored under, and the old shapes enter only through a stored result, never through a job file."""

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from pydantic import ValidationError

from mlcbench.schema import JobSpec, Result

STORES = sorted((Path(__file__).parents[2] / "benchmarks" / "studies").glob("*/*.db"))


def _rows(store: Path) -> list[tuple[str, str, str]]:
    with closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as connection:
        return connection.execute("SELECT job_id, workflow, result_json FROM results").fetchall()


@pytest.mark.parametrize("store", STORES, ids=lambda store: f"{store.parent.name}/{store.name}")
def test_every_stored_result_keeps_the_job_id_and_workflow_it_was_stored_under(store):
    rows = _rows(store)
    assert rows
    for job_id, workflow, result_json in rows:
        result = Result.model_validate_json(result_json)
        assert (result.job.job_id, result.job.workflow) == (job_id, workflow)
        # written back in today's shape and read again, it is the same job
        again = Result.model_validate_json(result.model_dump_json())
        assert (again.job.job_id, again.job.cell_settings) == (job_id, result.job.cell_settings)


def _stored_job(workflow: str, options: dict, repetition: dict) -> dict:
    """A job as the first stores wrote it: every workflow's options in one record."""
    record = {"compile_mode": None, "io_binding": True, "min_block_size": None, "fp32_accumulation": None, **options}
    return {"model": "llama2-7b", "workflow": workflow, "precision": "fp16", "batch_size": 1, "options": record,
            "repetition": repetition}


def test_a_stored_kernel_job_reads_as_handtuned_decode_with_its_id_and_a_job_file_of_it_is_refused():
    stored = _stored_job("torch_compile_decode", {"pdl": True, "triton_attention": True},
                         {"processes": 3, "max_processes": 3, "target": 0.02, "max_s": 600.0})
    result = Result.model_validate({"job_id": "82ade0673d6f09d7", "job": stored, "status": "ok"})
    assert (result.job.workflow, result.job.job_id) == ("handtuned_decode", "82ade0673d6f09d7")
    with pytest.raises(ValidationError, match="options.compile_mode|options.io_binding"):
        JobSpec.model_validate(stored)
    renamed_only = {**stored, "options": {"pdl": True, "triton_attention": True}, "repetition": {"processes": 3}}
    with pytest.raises(ValidationError, match="options.triton_attention: torch_compile_decode does not read it"):
        JobSpec.model_validate(renamed_only)


def test_a_stored_job_that_set_the_retired_knobs_keeps_its_id_and_a_suite_that_sets_them_is_told_the_replacement():
    capped = {"processes": 3, "max_processes": 5, "target": 0.02, "max_s": 60.0}
    stored = _stored_job("eager", {}, capped)
    result = Result.model_validate({"job_id": "x", "job": stored, "status": "ok"})
    plain = Result.model_validate({"job_id": "x", "job": _stored_job("eager", {}, {**capped, "max_processes": 3,
                                                                                    "max_s": 600.0}), "status": "ok"})
    assert result.job.retired_repetition is not None and plain.job.retired_repetition is None
    assert result.job.job_id != plain.job.job_id == JobSpec(model="llama2-7b", workflow="eager", precision="fp16",
                                                             batch_size=1).job_id
    assert json.loads(result.model_dump_json())["job"]["repetition"] == {"processes": 3, "target": 0.02}
    for knob, replacement in (("max_processes", "set processes"), ("max_s", "timeout_s bounds each process")):
        with pytest.raises(ValidationError, match=f"{knob}: retired: .*{replacement}"):
            JobSpec(model="llama2-7b", workflow="eager", precision="fp16", batch_size=1,
                    repetition={"processes": 3, knob: 5})


@pytest.mark.parametrize("knob, replacement", [("max_processes = 5", "set processes and remove max_processes"),
                                               ("max_s = 60.0", "timeout_s bounds each process; remove max_s")])
def test_a_suite_file_setting_a_retired_knob_is_an_error_naming_its_replacement(knob, replacement):
    from mlcbench.orchestrator.errors import UsageError
    from mlcbench.orchestrator.suites import parse_suite

    text = ('name = "old"\ndescription = "d"\n[[entries]]\nmodels = ["matmul-small"]\nworkflows = ["eager"]\n'
            f'batch_sizes = [1]\nrepetition = {{ processes = 3, {knob} }}\n')
    with pytest.raises(UsageError) as refused:
        parse_suite(text, "old.toml", Path("."))
    assert str(refused.value).startswith(f"old.toml: entries[0].repetition: {knob.split()[0]}: retired: ")
    assert str(refused.value).endswith(replacement)


def test_no_suite_file_the_repository_holds_sets_a_retired_knob():
    root = Path(__file__).parents[2]
    files = [*root.glob("benchmarks/suites/*.toml"), *root.glob("orchestrator/builtin_suites/*.toml")]
    assert files and [file for file in files if "max_processes" in file.read_text() or "max_s" in file.read_text()] == []
