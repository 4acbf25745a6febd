"""Bugs that defeated the checks of issue 63, planted in the worker processes a real `mlcbench sweep` starts
(tests/workers/plants/sitecustomize.py), each in a cell of its own: a wrong token in the timed calls only (at batch 1,
where eager's first near-tie left nothing to compare), timed calls that hand back an earlier call's output (an LLM and
a synthetic model), eager's logits plus 1e-6, and a synthetic workflow that runs eager's module. Each fails its check
(exit code 3) or carries its documented label; the correct cells pass in fp32 and bf16 at batch 1 and 4 (here the
synthetic ones, test_planted_cli.py the LLMs)."""

import json
from pathlib import Path

from mlcbench.orchestrator.errors import ExitCode
from tests.workers.test_planted_cli import CONFIGS, sweep

LLM_PLANTS = {"timed_wrong_last_token-qwen2-tiny": "timed_wrong_last_token",
              "stale_outputs-llama3-tiny": "stale_outputs", "eager_plus_epsilon-llama3-tiny": "eager_plus_epsilon"}
SYNTHETIC_PLANTS = {"stale-matmul": "stale_outputs", "eager-matmul": "runs_eager"}
CORRECT_SYNTHETIC = "clean-matmul"


def planted_suite(tmp_path: Path) -> Path:
    """torch_compile_decode cells (its loop uncompiled, as the plants run it) in bf16 at batch 1, and TorchScript cells
    of three copies of one small matmul, one process a cell."""
    lines = ['name = "planted-checks"', 'description = "bugs that defeated the checks of issue 63"']
    for name in LLM_PLANTS:
        lines += [f"[models.{name}]", f'config = "{CONFIGS / name.rsplit("-", 2)[-2]}-tiny"']
    for name in (*SYNTHETIC_PLANTS, CORRECT_SYNTHETIC):
        lines += [f"[models.{name}]", 'architecture = "matmul"', "hidden_size = 64", "intermediate_size = 128"]
    lines += ["[[entries]]", f"models = {json.dumps(list(LLM_PLANTS))}", 'workflows = ["torch_compile_decode"]',
              "batch_sizes = [1]", 'precision = "bf16"', "input_len = 16", "output_len = 8", "warmup = 0",
              "repeats = 4", "repetition = { processes = 1 }"]
    for precision, models in (("bf16", [*SYNTHETIC_PLANTS, CORRECT_SYNTHETIC]), ("fp32", [CORRECT_SYNTHETIC])):
        lines += ["[[entries]]", f"models = {json.dumps(models)}", 'workflows = ["torchscript"]',
                  "batch_sizes = [1, 4]", f'precision = "{precision}"', "input_len = 8", "warmup = 0", "repeats = 4",
                  "repetition = { processes = 1 }"]
    path = tmp_path / "planted-checks.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_bugs_that_passed_the_checks_of_issue_63_fail_them_through_the_cli(mlcbench, tmp_path):
    done, rows = sweep(mlcbench, tmp_path, planted_suite(tmp_path), {**LLM_PLANTS, **SYNTHETIC_PLANTS})
    assert done.returncode == ExitCode.JOBS_FAILED, done.stdout + done.stderr
    results = {(model, batch) if precision == "bf16" else (model, precision, batch): result
               for (model, precision, batch), (status, result) in rows.items() if status == "ok"}
    assert set(results) == {*((model, 1) for model in LLM_PLANTS),
                            *((model, batch) for model in (*SYNTHETIC_PLANTS, CORRECT_SYNTHETIC) for batch in (1, 4)),
                            *((CORRECT_SYNTHETIC, "fp32", batch) for batch in (1, 4))}
    checks = {cell: result["correctness"] for cell, result in results.items()}

    # right whenever checked (teacher-forced, and running free on each prompt), one token off in the timed calls
    wrong_last = checks[("timed_wrong_last_token-qwen2-tiny", 1)]
    calls = wrong_last["timed_calls_checked"]  # at least the suite's repeats (a minimum timed window may add more)
    assert not wrong_last["passed"] and wrong_last["timed_calls_failed"] == calls >= 4, wrong_last
    assert wrong_last["rel_l2_error"] <= wrong_last["tolerance"] and wrong_last["tokens_beyond_noise"] == 0
    assert wrong_last["timed_tokens"] == wrong_last["timed_tokens_compared"] == calls * 8, wrong_last
    assert "step 7" in wrong_last["note"], wrong_last

    # the timed calls cycle through three prompts: one output handed back for all of them differs from two
    stale = checks[("stale_outputs-llama3-tiny", 1)]
    assert stale["input_sets"] == 3 and not stale["passed"] and stale["timed_calls_failed"] >= 2, stale

    eager_plus_epsilon = checks[("eager_plus_epsilon-llama3-tiny", 1)]
    assert not eager_plus_epsilon["passed"] and eager_plus_epsilon["identical_to_reference"], eager_plus_epsilon
    assert eager_plus_epsilon["max_abs_diff"] > 0 and "epsilon" in eager_plus_epsilon["note"], eager_plus_epsilon

    for batch in (1, 4):
        stale = checks[("stale-matmul", batch)]  # its second input set's checked call already hands back the first
        assert stale["input_sets"] == 3 and not stale["passed"] and "input set 2" in stale["note"], stale
        silently_eager = results[("eager-matmul", batch)]
        assert silently_eager["correctness"]["passed"] and silently_eager["metrics"]["compiled_code_ran"] is False
        for clean in (results[(CORRECT_SYNTHETIC, batch)], results[(CORRECT_SYNTHETIC, "fp32", batch)]):
            assert clean["correctness"]["passed"] and clean["correctness"]["timed_calls_failed"] == 0, clean
            assert clean["correctness"]["input_sets"] == 3 and clean["metrics"]["compiled_code_ran"] is True, clean

    shown = mlcbench("results", "--model", "eager-matmul", "--model", CORRECT_SYNTHETIC)
    assert shown.returncode == ExitCode.OK, shown.stdout + shown.stderr
    lines = [line for line in shown.stdout.splitlines() if "matmul" in line]
    assert all(("(not compiled)" in line) == ("eager-matmul" in line) for line in lines) and len(lines) == 6, \
        shown.stdout
