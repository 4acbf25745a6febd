"""Options per workflow: a suite entry, a job and a job file may set only the options their workflow reads, and a job
carries its workflow's own class; job ids stay those stores were written with."""

import json
from typing import Optional

import pytest
from pydantic import ValidationError

from mlcbench.schema import WORKFLOWS, JobSpec, SuiteEntry
from mlcbench.schema.legacy import LATER_OPTIONS
from mlcbench.schema.options import OPTION_CLASSES

EVERY_OPTION = {name: field for options in OPTION_CLASSES for name, field in options.model_fields.items()}

# (workflow, options it reads set away from their defaults): one per catalog row with options
READ = {
    "torch_compile": {"compile_mode": "max-autotune"},
    "torch_compile_forward": {"compile_mode": "max-autotune"},
    "torch_compile_static": {"compile_mode": "default"},
    "torch_compile_decode": {"fused_projections": False, "pdl": True, "prefill_graph": True},
    "handtuned_decode": {"pdl": True, "triton_gemv": True, "triton_attention": True, "triton_gemm": True},
    "onnxruntime": {"io_binding": False},
    "onnxruntime_cuda": {"io_binding": False},
    "onnxruntime_trt": {"io_binding": False},
    "torch_tensorrt": {"min_block_size": 3, "fp32_accumulation": True},
    "torch_compile_tensorrt": {"min_block_size": 3, "fp32_accumulation": True},
}


def entry(workflow: str, options: dict) -> SuiteEntry:
    return SuiteEntry(models=["llama-2layer"], workflows=[workflow], batch_sizes=[1], options=options)


def test_every_workflow_with_options_is_tested_and_every_option_read_by_one():
    assert set(READ) == {name for name, info in WORKFLOWS.items() if info.options.model_fields}
    read = {name for info in WORKFLOWS.values() for name in info.options.model_fields}
    assert read == set(EVERY_OPTION)


@pytest.mark.parametrize("workflow", READ)
def test_a_workflow_takes_the_options_it_reads_and_refuses_the_others(workflow):
    assert entry(workflow, READ[workflow]).options == READ[workflow]
    job = JobSpec(model="llama-2layer", workflow=workflow, precision="fp32", batch_size=1, options=READ[workflow])
    assert isinstance(job.options, WORKFLOWS[workflow].options)
    assert job.options.model_dump(exclude_defaults=True) == READ[workflow]
    for name in EVERY_OPTION:
        if name not in WORKFLOWS[workflow].options.model_fields:
            value = "default" if name == "compile_mode" else 1 if name == "min_block_size" else True
            with pytest.raises(ValidationError, match=rf"options\.{name}: {workflow} does not read it"):
                entry(workflow, {**READ[workflow], name: value})


@pytest.mark.parametrize("options", [{"triton_gemm": True}, {"io_binding": True}, {"compile_mode": None}])
def test_eager_refuses_any_option_given_even_at_its_default(options):
    with pytest.raises(ValidationError, match=rf"options\.{next(iter(options))}: eager does not read it "
                                              r"\(its options: none"):
        entry("eager", options)


def test_a_kernel_on_torch_compile_decode_points_to_handtuned_decode():
    with pytest.raises(ValidationError, match="torch_compile_decode does not read it .*; handtuned_decode reads it"):
        entry("torch_compile_decode", {"triton_attention": True})


def test_handtuned_decode_with_no_kernel_on_is_refused():
    for options in ({}, {"pdl": True, "triton_gemm": False}):
        with pytest.raises(ValidationError, match="handtuned_decode with none of triton_gemv, triton_attention, "
                                                  "triton_gemm on is torch_compile_decode"):
            entry("handtuned_decode", options)


def test_the_suite_file_naming_an_option_eager_does_not_read_is_exit_2_naming_file_entry_and_option(mlcbench,
                                                                                                     tmp_path):
    suite = tmp_path / "mine.toml"
    suite.write_text('name = "mine"\ndescription = "d"\n[[entries]]\nmodels = ["matmul-small"]\n'
                     'workflows = ["eager"]\nbatch_sizes = [1]\noptions = { triton_gemm = true }\n')
    done = mlcbench("sweep", "--suite", str(suite))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith(f"error: {suite}: entries[0]: options.triton_gemm: eager does not read it")
    assert done.stderr.strip().count("\n") == 0 and not (tmp_path / "results").exists()


# ids computed by main 564648d, when every option was every workflow's and the kernels torch_compile_decode's
STORED_IDS = [
    ("torch_compile_decode", 1, {"pdl": True, "triton_attention": True}, "82ade0673d6f09d7"),
    ("torch_compile_decode", 1, {"pdl": True, "triton_gemv": True, "triton_attention": True, "prefill_graph": True},
     "68b90d99844974fe"),
    ("torch_compile_decode", 64, {"triton_gemm": True, "prefill_graph": True}, "82fd85c3594c561e"),
    ("torch_compile_decode", 1, {"pdl": True, "prefill_graph": True}, "666bbcfa7a144f64"),
]


@pytest.mark.parametrize("workflow, batch, options, job_id", STORED_IDS)
def test_job_ids_stay_those_stores_were_written_with(workflow, batch, options, job_id):
    kernels = any(name.startswith("triton_") for name in options)
    today = "handtuned_decode" if kernels else workflow
    job = JobSpec(model="llama2-7b", workflow=today, precision="fp16", batch_size=batch, options=options)
    assert job.job_id == job_id
    assert JobSpec.model_validate_json(job.model_dump_json()).job_id == job_id
    if kernels:  # the kernels on torch_compile_decode, as a job or a job file gave them, are refused, not renamed
        with pytest.raises(ValidationError, match="torch_compile_decode does not read it .*handtuned_decode reads it"):
            JobSpec(model="llama2-7b", workflow=workflow, precision="fp16", batch_size=batch, options=options)


@pytest.mark.parametrize("options", [{"triton_gemm": True}, {"io_binding": True}])
def test_a_job_of_eager_refuses_any_option_with_the_suites_message(options):
    name = next(iter(options))
    with pytest.raises(ValidationError, match=rf"options\.{name}: eager does not read it \(its options: none"):
        JobSpec(model="ffn-small", workflow="eager", precision="fp32", batch_size=1, options=options)


def test_other_workflows_option_ids_stay():
    def spec(workflow, precision, options):
        return JobSpec(model="ffn-small", workflow=workflow, precision=precision, batch_size=4, options=options)

    assert spec("onnxruntime", "fp32", {"io_binding": False}).job_id == "f04f065a331ec6a0"
    assert spec("torch_tensorrt", "fp16", {"min_block_size": 3, "fp32_accumulation": True}).job_id \
        == "cfc7eb1f0299ceb7"
    assert spec("torch_compile", "fp32", {"compile_mode": "max-autotune"}).job_id == "a65e390b8c2d51a7"


def test_each_option_means_one_thing_in_every_class_that_has_it():
    for options in OPTION_CLASSES:
        for name, field in options.model_fields.items():  # None is one class's "its own default"
            assert Optional[EVERY_OPTION[name].annotation] == Optional[field.annotation], name


@pytest.mark.parametrize("workflow, option, default", [
    ("torch_compile", "compile_mode", "default"), ("torch_compile_forward", "compile_mode", "default"),
    ("torch_compile_static", "compile_mode", "reduce-overhead"), ("torch_compile_decode", "pdl", False),
    ("torch_compile_decode", "fused_projections", True), ("onnxruntime", "io_binding", True),
    ("torch_tensorrt", "min_block_size", 5), ("torch_tensorrt", "fp32_accumulation", False),
])
def test_a_job_that_sets_an_option_to_its_default_is_the_job_that_leaves_it_out(workflow, option, default):
    def job(**options) -> JobSpec:
        return JobSpec(model="llama-2layer", workflow=workflow, precision="fp32", batch_size=1, options=options)

    left_out, at_default = job(), job(**{option: default})
    assert (at_default.job_id, at_default.cell_settings, at_default.label()) == \
        (left_out.job_id, left_out.cell_settings, left_out.label())
    assert getattr(left_out.options, option) == default
    assert job(**{option: "max-autotune" if option == "compile_mode" else 3 if option == "min_block_size"
                  else not default}).job_id != left_out.job_id


def test_the_compiled_decode_mode_follows_the_device_and_a_mode_given_is_its_own_job():
    decode = [JobSpec(model="llama-2layer", workflow="torch_compile_decode", precision="fp32", batch_size=1,
                      device=device, options=options)
              for device in ("cuda", "cpu") for options in ({}, {"compile_mode": "reduce-overhead"})]
    assert [job.options.mode_on(job.device) for job in decode] == ["reduce-overhead", "reduce-overhead", "default",
                                                                   "reduce-overhead"]
    assert decode[0].options == decode[2].options and decode[0].job_id != decode[1].job_id


def test_the_decode_kernels_suite_keeps_its_job_ids_with_its_kernels_under_handtuned_decode():
    from pathlib import Path

    from mlcbench.orchestrator.suites import get_suite

    jobs = get_suite(str(Path(__file__).parents[2] / "benchmarks" / "suites" / "decode-kernels.toml")).expand("cuda")
    # as main 564648d expanded it, every cell torch_compile_decode's
    assert [job.job_id for job in jobs] == ["800efb2096211b38", "3b4080ae5876698b", "12f446b9a36635ff",
                                            "98c72fa7fd2fe105", "9a2bf7acc22cefd5", "37611bb4182f3567",
                                            "f975ac423417a0b6", "525fd226e8ce204d"]
    assert [job.workflow for job in jobs] == ["torch_compile_decode"] * 2 + ["handtuned_decode"] * 4 \
        + ["torch_compile_decode", "handtuned_decode"]


def test_every_option_is_one_the_first_stores_had_or_a_later_one_hashed_only_away_from_its_default():
    assert set(EVERY_OPTION) == {"compile_mode", "io_binding", "min_block_size", "fp32_accumulation", *LATER_OPTIONS}


@pytest.mark.parametrize("workflow, options, message", [
    ("eager", {"triton_gemm": True}, "options.triton_gemm: eager does not read it (its options: none; "
                                     "handtuned_decode reads it)"),
    ("torch_compile_decode", {"triton_gemv": True}, "options.triton_gemv: torch_compile_decode does not read it"),
])
def test_a_job_file_line_with_an_option_its_workflow_does_not_read_is_a_job_file_error_not_a_rename(tmp_path, workflow,
                                                                                                 options, message):
    from mlcbench.workers.exchange import JobFileError, read_jobs

    line = JobSpec(model="llama-2layer", workflow="eager", precision="fp32", batch_size=1).model_dump(mode="json")
    path = tmp_path / "jobs.jsonl"
    path.write_text(json.dumps({**line, "workflow": workflow, "options": options}) + "\n")
    with pytest.raises(JobFileError) as refused:
        read_jobs(path)
    assert str(refused.value).startswith(f"{path}:1: field options: {message}")


def test_the_command_line_reaches_handtuned_decode_with_option_and_a_wrong_option_is_exit_2(mlcbench):
    done = mlcbench("sweep", "--model", "tinyllama-1.1b", "--workflow", "handtuned_decode", "--option",
                    "triton_gemv=true", "--option", "pdl=true", "--plan")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "handtuned_decode [pdl=True, triton_gemv=True]" in done.stdout
    wrong = mlcbench("sweep", "--model", "tinyllama-1.1b", "--workflow", "eager,handtuned_decode", "--option",
                     "triton_gemv=true", "--plan")
    assert wrong.returncode == 2
    assert wrong.stderr.strip() == "error: --option: options.triton_gemv: eager does not read it (its options: none; " \
                                   "handtuned_decode reads it)"
    for bad, says in (("triton_gemv=maybe", "options.triton_gemv: Input should be a valid boolean"),
                      ("triton_gemv", "expected NAME=VALUE")):
        refused = mlcbench("sweep", "--model", "tinyllama-1.1b", "--workflow", "handtuned_decode", "--option", bad,
                           "--plan")
        assert refused.returncode == 2 and says in refused.stderr, refused.stderr
    beside_a_suite = mlcbench("sweep", "--suite", "smoke", "--option", "pdl=true", "--plan")
    assert beside_a_suite.returncode == 2 and "--option makes a grid of its own" in beside_a_suite.stderr
