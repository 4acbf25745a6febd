"""The checks of issue 63 on their own: a timed call against its prompt's checked call, token choices within noise
bounded by what the workflow's own logit error explains, and eager's logits plus an epsilon (the tiny Llama and its
decode loop of test_planted_bugs.py)."""

import pytest
import torch

from mlcbench.workers.interface import Generation
from mlcbench.workers.measurement.correctness import compare_teacher_forced, compare_with_checked_call
from tests.workers.test_planted_bugs import DTYPES, eager, forced_run

# one row, three steps, vocabulary of four: the checked call chose 0, then 1, then 2
LOGITS = torch.tensor([[[4.0, 1.0, 0.0, 0.0], [0.0, 3.0, 2.99999, 0.0], [0.0, 0.0, 5.0, 1.0]]])
CHECKED = Generation(tokens=torch.tensor([[0, 1, 2]]), step_logits=LOGITS)


def test_a_timed_call_may_part_from_its_checked_call_only_where_that_calls_own_margin_is_within_noise():
    assert compare_with_checked_call(torch.tensor([[0, 1, 2]]), CHECKED, torch.float32) == (False, 3, "")
    # step 1: 3.0 against 2.99999, within fp32's call-to-call noise; its later steps follow another prefix
    assert compare_with_checked_call(torch.tensor([[0, 2, 3]]), CHECKED, torch.float32) == (False, 2, "")
    failed, compared, why = compare_with_checked_call(torch.tensor([[0, 1, 3]]), CHECKED, torch.float32)
    assert failed and compared == 3 and "step 2" in why
    # a loop that returns no logits: every token must be its checked call's
    failed, compared, _ = compare_with_checked_call(torch.tensor([[0, 2, 3]]), Generation(CHECKED.tokens),
                                                    torch.float32)
    assert failed and compared == 2


def _second_best_within(output: Generation, share: float) -> Generation:
    """The loop's own logits, but the second-best token wherever its top two are within `share` of the best."""
    top = output.step_logits.double().topk(2, dim=-1)
    near = top.values[..., 0] - top.values[..., 1] <= share * top.values[..., 0].abs()
    return Generation(torch.where(near, top.indices[..., 1], output.tokens), output.step_logits)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_taking_the_second_best_token_at_near_ties_fails_where_rounding_explains_few_flips(precision):
    output, reference, gold = forced_run(precision, 16)
    assert compare_teacher_forced(output, reference, DTYPES[precision], gold).passed
    cheat = compare_teacher_forced(_second_best_within(output, 0.02), reference, DTYPES[precision], gold)
    assert not cheat.passed and cheat.token_agreement < 0.95


def test_eagers_logits_plus_an_epsilon_fail_as_eagers_output_in_half_precision():
    _, _, reference, gold = eager("bf16", 2)
    moved = Generation(reference.tokens, reference.step_logits.float() + 1e-6)
    check = compare_teacher_forced(moved, reference, torch.bfloat16, gold)
    assert not check.passed and check.identical_to_reference and check.max_abs_diff > 0 and "epsilon" in check.note
    assert compare_teacher_forced(moved, reference, torch.bfloat16, gold, runs_eager_kernels=True).passed
    output, _, _ = forced_run("bf16", 2)  # the loop's own kernels: as far from eager as a rounding of its own
    assert not compare_teacher_forced(output, reference, torch.bfloat16, gold).identical_to_reference
