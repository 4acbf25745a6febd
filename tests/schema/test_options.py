"""Options per workflow: a suite entry may set only the options its workflows read; the one record a job carries keeps
the job ids stores were written with, and the hand-written kernels' jobs read as handtuned_decode's."""

import pytest
from pydantic import ValidationError

from mlcbench.schema import WORKFLOWS, JobSpec, SuiteEntry, WorkflowOptions
from mlcbench.schema.options import OPTION_CLASSES

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
    assert read == set(WorkflowOptions.model_fields)


@pytest.mark.parametrize("workflow", READ)
def test_a_workflow_takes_the_options_it_reads_and_refuses_the_others(workflow):
    assert entry(workflow, READ[workflow]).options.model_dump(exclude_defaults=True) == READ[workflow]
    for name in WorkflowOptions.model_fields:
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
    stored = JobSpec(model="llama2-7b", workflow=workflow, precision="fp16", batch_size=batch, options=options)
    assert stored.job_id == job_id
    kernels = any(name.startswith("triton_") for name in options)
    assert stored.workflow == ("handtuned_decode" if kernels else "torch_compile_decode")
    # the same job written today, under its own row, is the stored one: a sweep resumes it
    assert JobSpec(**{**stored.model_dump(), "workflow": stored.workflow}).job_id == job_id
    assert JobSpec.model_validate_json(stored.model_dump_json()).job_id == job_id
    # options given as the record itself, as a script builds them, are read the same way
    assert JobSpec(model="llama2-7b", workflow=workflow, precision="fp16", batch_size=batch,
                   options=WorkflowOptions(**options)).workflow == stored.workflow


def test_other_workflows_option_ids_stay():
    def spec(workflow, precision, options):
        return JobSpec(model="ffn-small", workflow=workflow, precision=precision, batch_size=4, options=options)

    assert spec("onnxruntime", "fp32", {"io_binding": False}).job_id == "f04f065a331ec6a0"
    assert spec("torch_tensorrt", "fp16", {"min_block_size": 3, "fp32_accumulation": True}).job_id \
        == "cfc7eb1f0299ceb7"
    assert spec("torch_compile", "fp32", {"compile_mode": "max-autotune"}).job_id == "a65e390b8c2d51a7"


def test_the_record_is_the_union_of_the_classes_and_each_option_means_one_thing():
    fields = {}
    for options in OPTION_CLASSES:
        for name, field in options.model_fields.items():
            assert fields.setdefault(name, field.annotation) == field.annotation, name
    assert set(fields) == set(WorkflowOptions.model_fields)


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


def test_an_option_added_after_the_first_stores_defaults_to_none_so_unset_it_keeps_every_job_id():
    assert WorkflowOptions.LATER and all(WorkflowOptions.model_fields[name].default is None
                                         for name in WorkflowOptions.LATER)
