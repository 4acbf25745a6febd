"""The synthetic check (workers/measurement/synthetic.py), anchored as an LLM's: per batch row, against eager within
GOLD_MULTIPLIER x eager's own error against fp32 in that row; each timed call per element within a rounding of the
checked call's. Through the CLI, with bugs planted in the workflow's module: tests/workers/test_planted_checks_cli.py."""

import copy

import pytest
import torch

from mlcbench.schema import MODELS, JobSpec
from mlcbench.workers.measurement.correctness import CALL_TO_CALL_NOISE, GOLD_MULTIPLIER, compare_tensors
from mlcbench.workers.measurement.synthetic import ROW_ROUNDING, beyond_call_noise, compare_rows
from mlcbench.workers.models import synthetic

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def eager_and_fp32(model: str, precision: str, batch: int):
    job = JobSpec(model=model, workflow="torchscript", precision=precision, batch_size=batch, device="cpu")
    module, (x,) = synthetic.build(MODELS[model], job, DTYPES[precision], torch.device("cpu"))
    with torch.no_grad():
        return module(x), copy.deepcopy(module).float()(x.float()), module, x


def test_one_row_ten_percent_wrong_at_b64_fails_where_the_whole_tensor_norm_passed():
    eager, gold, _, _ = eager_and_fp32("ffn-small", "bf16", 64)
    output = eager.clone()
    output[17] *= 1.1
    check = compare_rows(output, eager, gold, torch.bfloat16)
    assert not check.passed and check.worst_row == 17 and check.rel_l2_error == pytest.approx(0.1, rel=0.01)
    assert compare_tensors(output, eager, torch.bfloat16).passed  # 0.1 / sqrt(64) under the old 2 %


@pytest.mark.parametrize("model", ["matmul-relu-small", "ffn-small", "ffn-multilayer-small"])
def test_leaky_relu_for_relu_fails_in_bf16_and_fp32_and_eagers_own_output_recomputed_passes(model):
    for precision in ("bf16", "fp32"):
        eager, gold, module, x = eager_and_fp32(model, precision, 4)
        dtype = DTYPES[precision]
        relu = torch.relu
        try:
            torch.relu = lambda tensor: torch.nn.functional.leaky_relu(tensor, 0.01)
            with torch.no_grad():
                leaky = module(x)
        finally:
            torch.relu = relu
        check = compare_rows(leaky, eager, gold if precision == "bf16" else None, dtype)
        assert not check.passed and check.rel_l2_error > check.tolerance, (precision, check)
        if precision == "bf16":  # the tolerance is eager's own error against fp32, doubled, never below a rounding
            eager_error = ((eager.double() - gold.double())[check.worst_row].norm()
                           / gold.double()[check.worst_row].norm()).item()
            assert check.tolerance == pytest.approx(max(GOLD_MULTIPLIER * eager_error, ROW_ROUNDING[dtype]))
            if model != "ffn-multilayer-small":  # eight leaky layers add up to 2.2 %
                assert compare_tensors(leaky, eager, dtype).passed  # the old whole-tensor 2 % passed it
        with torch.no_grad():
            assert compare_rows(torch.jit.freeze(torch.jit.trace(module, (x,)))(x), eager,
                                gold if precision == "bf16" else None, dtype).passed


def test_a_timed_call_passes_rounding_flips_and_fails_one_element_off():
    exact = torch.randn(4, 32, 256)
    checked = exact.to(torch.bfloat16)
    # the same values computed in another order, a little apart in fp32: one bf16 step apart wherever they round apart
    flipped = (exact * (1 + 2 ** -10)).to(torch.bfloat16)
    assert (flipped != checked).any() and beyond_call_noise(flipped, checked, torch.bfloat16).item() <= 1
    wrong = checked.clone()
    wrong[2, 5, 7] *= 1.1
    assert beyond_call_noise(wrong, checked, torch.bfloat16).item() > 1
    # a whole-tensor norm dilutes one element to nothing
    assert ((wrong.double() - checked.double()).norm() / checked.double().norm()).item() < CALL_TO_CALL_NOISE[torch.bfloat16]
    # an element near zero moves with its row's scale
    near_zero = checked.clone()
    near_zero[0, 0, 0] = 1e-6
    moved = near_zero.clone()
    moved[0, 0, 0] = 2e-6
    assert beyond_call_noise(moved, near_zero, torch.bfloat16).item() <= 1
