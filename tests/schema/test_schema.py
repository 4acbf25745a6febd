import pytest
from pydantic import ValidationError

from mlcbench.schema import WORKFLOWS, Correctness, Metrics, Result, Suite, SuiteEntry, Timing
from mlcbench.schema.jobs import JobSpec


def job(**overrides) -> JobSpec:
    return JobSpec(**{"model": "ffn-small", "workflow": "eager", "precision": "fp32", "batch_size": 4,
                      "device": "cpu", **overrides})


def test_job_round_trip_keeps_every_field_and_the_id():
    original = job(workflow="torch_compile", options={"compile_mode": "max-autotune"}, seed=7)
    again = JobSpec.model_validate_json(original.model_dump_json())
    assert again == original
    assert again.job_id == original.job_id


def test_job_id_changes_with_any_setting_but_not_the_timeout():
    base = job()
    assert job(batch_size=8).job_id != base.job_id
    assert job(precision="bf16").job_id != base.job_id
    assert job(workflow="onnxruntime", options={"io_binding": False}).job_id != job(workflow="onnxruntime").job_id
    assert job(timeout_s=5).job_id == base.job_id


@pytest.mark.parametrize("workflow, option, others", [
    ("torch_compile_decode", "fused_projections", {}), ("torch_compile_decode", "pdl", {}),
    ("torch_compile_decode", "prefill_graph", {}), ("handtuned_decode", "triton_gemv", {"triton_attention": True}),
    ("handtuned_decode", "triton_attention", {"triton_gemv": True}),
    ("handtuned_decode", "triton_gemm", {"triton_gemv": True})])
def test_a_later_option_keeps_old_job_ids_at_its_default_and_makes_another_cell_when_set_away(workflow, option,
                                                                                              others):
    base = job(workflow=workflow, model="llama-2layer", options=others)
    default = WORKFLOWS[workflow].options.model_fields[option].default
    assert job(workflow=workflow, model="llama-2layer", options={**others, option: default}).job_id == base.job_id
    variant = job(workflow=workflow, model="llama-2layer", options={**others, option: not default})
    assert variant.job_id != base.job_id and variant.cell_settings != base.cell_settings
    assert variant.baseline_settings == base.baseline_settings  # eager of the same settings is its baseline
    assert f"{option}={not default}" in variant.label()
    assert JobSpec.model_validate_json(variant.model_dump_json()).job_id == variant.job_id


def test_a_jobs_label_names_the_options_set_away_from_their_defaults():
    assert job(workflow="onnxruntime").label() == "ffn-small/onnxruntime/fp32/b4"
    optioned = job(workflow="torch_tensorrt", options={"min_block_size": 3, "fp32_accumulation": True})
    assert optioned.label() == "ffn-small/torch_tensorrt/fp32/b4 [min_block_size=3, fp32_accumulation=True]"
    assert optioned.workflow_label() == "torch_tensorrt [min_block_size=3, fp32_accumulation=True]"


@pytest.mark.parametrize("bad", [{"unknown": 1}, {"batch_size": 0}, {"model": "gpt-5"}, {"precision": "int3"},
                                 {"schema_version": 2}])
def test_job_rejects_bad_fields(bad):
    with pytest.raises(ValidationError):
        job(**bad)


def test_result_round_trip_with_metrics_and_correctness():
    spec = job(workflow="onnxruntime")
    result = Result(job_id=spec.job_id, job=spec, status="ok",
                    metrics=Metrics(latency=Timing(median_ms=1.5, p10_ms=1.4, p90_ms=1.7, mean_ms=1.55, cv=0.06,
                                                   repeats=10, method="perf_counter"),
                                    tflops=0.1, settings={"execution_providers": "CPUExecutionProvider"}),
                    correctness=Correctness(max_abs_diff=1e-6, rel_l2_error=1e-7, cosine=1.0, tolerance=1e-3,
                                            passed=True))
    again = Result.model_validate_json(result.model_dump_json())
    assert again == result
    assert again.metrics.latency.noisy  # cv 6 % is over the 5 % flag


def test_a_result_stored_before_the_host_cpu_was_recorded_still_loads():
    spec = job()
    stored = Result(job_id=spec.job_id, job=spec, status="ok").model_dump(mode="json")
    for field in ("host_cpu", "host_cpus"):
        del stored["provenance"][field]
    provenance = Result.model_validate(stored).provenance
    assert provenance.host_cpu is None and provenance.host_cpus is None


def test_result_status_is_closed():
    spec = job()
    with pytest.raises(ValidationError):
        Result(job_id=spec.job_id, job=spec, status="slow")


def test_suite_expands_the_grid_at_each_models_default_precision():
    suite = Suite(name="t", description="", entries=[
        SuiteEntry(models=["ffn-tinyllama", "ffn-llama2"], workflows=["eager", "torch_compile"], batch_sizes=[1, 4])])
    jobs = suite.expand("cuda")
    assert len(jobs) == 8
    assert {j.precision for j in jobs if j.model == "ffn-tinyllama"} == {"bf16"}
    assert {j.precision for j in jobs if j.model == "ffn-llama2"} == {"fp16"}


@pytest.mark.parametrize("setting, refused", [("input_len", 8193), ("output_len", 0), ("warmup", -1),
                                              ("repeats", 10001), ("timeout_s", 0), ("input_len", True)])
def test_a_suite_entry_takes_each_setting_with_the_jobs_default_and_refuses_what_a_job_refuses(setting, refused):
    entry = SuiteEntry(models=["ffn-small"], workflows=["eager"], batch_sizes=[4])
    [expanded] = Suite(name="s", description="d", entries=[entry]).expand("cpu")
    assert getattr(expanded, setting) == getattr(job(), setting) == getattr(entry, setting)
    messages = []
    for model, fields in ((JobSpec, {"model": "ffn-small", "workflow": "eager", "precision": "fp32", "batch_size": 4}),
                          (SuiteEntry, {"models": ["ffn-small"], "workflows": ["eager"], "batch_sizes": [4]})):
        with pytest.raises(ValidationError) as error:
            model.model_validate({**fields, setting: refused})
        messages.append([problem["msg"] for problem in error.value.errors()])
    assert messages[0] == messages[1]


def test_the_command_lines_help_gives_the_jobs_default_lengths():
    import typer

    from mlcbench.orchestrator.cli import app

    sweep = typer.main.get_command(app).commands["sweep"]  # type: ignore[attr-defined]
    helps = {param.name: param.help for param in sweep.params}
    for name in ("input_len", "output_len"):
        assert helps[name].endswith(f"(default {JobSpec.model_fields[name].default})"), helps[name]
