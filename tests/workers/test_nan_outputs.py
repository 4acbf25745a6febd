"""A model whose output is NaN: its check fails with that reason, the result line still parses on the host (JSON has no
NaN), and the sweep's closing line counts the failed check."""

import pytest
import torch

from mlcbench.orchestrator.runtimes.follower import parse_result_line
from mlcbench.orchestrator.sweep import SweepReport
from mlcbench.schema.protocol import encode_line
from mlcbench.workers.decode import compiled_step
from mlcbench.workers.interface import Generation
from mlcbench.workers.measurement.correctness import compare_teacher_forced, compare_tensors
from mlcbench.workers.models import llm as llm_models
from mlcbench.workers.runner import run_job
from tests.workers.test_teacher_forcing import job


@pytest.mark.parametrize("precision", ["fp32", "bf16"])  # bf16: eager's own error against fp32 sets the tolerance
def test_a_model_whose_output_is_nan_fails_its_check_with_why_and_its_line_parses(tmp_path, monkeypatch, precision):
    monkeypatch.setattr(compiled_step, "compile_for_warm_start", lambda function, **options: function)
    build = llm_models.build

    def nan_weights(*args, **kwargs):
        model = build(*args, **kwargs)
        with torch.no_grad():
            model.lm_head.weight.fill_(float("nan"))
        return model

    monkeypatch.setattr(llm_models, "build", nan_weights)
    spec = job(precision=precision)

    result = parse_result_line(encode_line(run_job(spec, tmp_path)), spec)

    assert result.status == "ok", result.reason
    assert not result.correctness.passed
    assert result.reason.startswith("correctness check failed against eager: the workflow's logits: ")
    assert "value(s) NaN or infinite; eager's logits: " in result.reason
    assert SweepReport(stored=[result]).failed_checks == 1


def test_an_output_that_holds_nan_is_named_and_no_figure_is_nan():
    reference = torch.ones(8)
    output = reference.clone()
    output[3] = float("nan")

    check = compare_tensors(output, reference, torch.float32)

    assert not check.passed and check.not_finite == "the workflow's output: 1 of 8 value(s) NaN or infinite"
    assert check.rel_l2_error is None and check.cosine is None


def test_teacher_forced_logits_with_inf_are_named():
    logits = torch.zeros(2, 3, 5)
    output = logits.clone()
    output[1, 2, 4] = float("inf")
    tokens = torch.zeros(2, 3, dtype=torch.long)

    check = compare_teacher_forced(Generation(tokens, output), Generation(tokens, logits), torch.float32)

    assert not check.passed and check.not_finite == "the workflow's logits: 1 of 30 value(s) NaN or infinite"
