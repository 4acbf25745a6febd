"""Bugs planted in the compiled path only (tests/workers/plants/sitecustomize.py, loaded by the worker processes a
real `mlcbench sweep` starts), each in a cell of its own, judged by the check as a user meets it: exit code 3 and the
stored result's check failed. Each passed the check before the timed calls were checked, before a logit
bit-identical to eager's was suspect, and before random weights had attention as peaked as a full-size model's
(workers/models/llm.py, peaked_attention); the same loop without a bug passes in fp32 and bf16 at batch 1 and 4."""

import json
import os
import sqlite3
from pathlib import Path

from mlcbench.orchestrator.errors import ExitCode

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "benchmarks" / "suites" / "configs"
PLANTS = Path(__file__).resolve().parent / "plants"
ATTENTION_BUGS = ("rope_minus_one", "rope_theta", "softmax_scale")
LLM_BUGS = {**{f"{bug}-{model}": bug for bug in ATTENTION_BUGS for model in ("llama3-tiny", "qwen2-tiny")},
            "free_running_feed-llama3-tiny": "free_running_feed", "returns_reference-llama3-tiny": "returns_reference"}


def suite(tmp_path: Path, models: dict[str, str], precisions: tuple[str, ...], batch_sizes: tuple[int, ...],
          synthetic: bool = False) -> Path:
    """A suite of torch_compile_decode cells on copies of the shipped tiny configs (model name -> config), one
    process a cell, two timed calls; with `synthetic`, a matmul through TorchScript."""
    lines = ['name = "planted"', 'description = "bugs planted in the compiled path"']
    for name, config in models.items():
        lines += [f"[models.{name}]", f'config = "{CONFIGS / config}"']
    for precision in precisions:
        lines += ["[[entries]]", f"models = {json.dumps(list(models))}", 'workflows = ["torch_compile_decode"]',
                  f"batch_sizes = {list(batch_sizes)}", f'precision = "{precision}"', "input_len = 16",
                  "output_len = 8", "warmup = 0", "repeats = 2", "repetition = { processes = 1 }"]
    if synthetic:
        lines += ["[[entries]]", 'models = ["matmul-small"]', 'workflows = ["torchscript"]', "batch_sizes = [1]",
                  "warmup = 0", "repeats = 3", "repetition = { processes = 1 }"]
    path = tmp_path / "planted.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def sweep(mlcbench, tmp_path: Path, suite_file: Path, plants: dict[str, str]):
    environment = {"PYTHONPATH": os.pathsep.join(filter(None, [str(PLANTS), os.environ.get("PYTHONPATH")])),
                   "MLCBENCH_TEST_PLANTS": json.dumps(plants)}
    # one worker process runs a round's cells (a plant follows the job's model): fewer start-ups on a loaded CPU
    done = mlcbench("sweep", "--suite", str(suite_file), "--worker-scope", "round", env=environment, timeout=1500)
    rows = sqlite3.connect(tmp_path / "results" / "mlcbench.db").execute(
        "select model, precision, batch_size, status, result_json from results").fetchall()
    return done, {(model, precision, batch): (status, json.loads(result)) for model, precision, batch, status, result
                  in rows}


def test_each_bug_planted_in_the_compiled_path_fails_its_check_through_the_cli(mlcbench, tmp_path):
    models = {name: name.rsplit("-", 2)[-2] + "-tiny" for name in LLM_BUGS}
    done, rows = sweep(mlcbench, tmp_path, suite(tmp_path, models, ("bf16",), (1,), synthetic=True),
                       {**LLM_BUGS, "matmul-small": "wrong_after_first_call"})
    assert done.returncode == ExitCode.JOBS_FAILED, done.stdout + done.stderr
    checks = {model: result["correctness"] for (model, _, _), (status, result) in rows.items() if status == "ok"}
    assert set(checks) == {*LLM_BUGS, "matmul-small"}, rows
    assert not any(check["passed"] for check in checks.values()), checks
    for bug in ATTENTION_BUGS:  # the logits of a decode step (or the prefill), teacher-forced
        for model in ("llama3-tiny", "qwen2-tiny"):
            check = checks[f"{bug}-{model}"]
            assert check["rel_l2_error"] > check["tolerance"] and not check["identical_to_reference"], (bug, check)
    # right whenever it is fed eager's tokens: only its timed calls, running free, show the bug
    free = checks["free_running_feed-llama3-tiny"]
    assert free["rel_l2_error"] <= free["tolerance"] and free["tokens_beyond_noise"] == 0, free
    assert free["timed_calls_failed"] == free["timed_calls_checked"] == 2 and free["free_running_tokens"] > 0, free
    # eager's own logits handed to the check, its own (right) loop timed
    reference = checks["returns_reference-llama3-tiny"]
    assert reference["identical_to_reference"] and reference["max_abs_diff"] == 0.0, reference
    assert reference["timed_calls_failed"] == 0, reference
    # right on its first (checked) call, x1.5 on every later one: the other input sets' checked calls fail, and the
    # timed calls on the first set differ from its checked call
    synthetic = checks["matmul-small"]
    assert synthetic["rel_l2_error"] <= synthetic["tolerance"] and "input set 2" in synthetic["note"], synthetic
    assert synthetic["timed_calls_checked"] >= 3 and synthetic["timed_calls_failed"] >= 1, synthetic


def test_the_same_loop_without_a_bug_passes_every_check_in_fp32_and_bf16_at_batch_1_and_4(mlcbench, tmp_path):
    models = {"llama3-tiny": "llama3-tiny", "qwen2-tiny": "qwen2-tiny"}
    done, rows = sweep(mlcbench, tmp_path, suite(tmp_path, models, ("fp32", "bf16"), (1, 4)), {})
    assert done.returncode == ExitCode.OK, done.stdout + done.stderr
    assert set(rows) == {(model, precision, batch) for model in models for precision in ("fp32", "bf16")
                         for batch in (1, 4)}
    for cell, (status, result) in rows.items():
        check = result["correctness"]
        assert status == "ok" and check["passed"] and not check["identical_to_reference"], (cell, check)
        assert check["timed_calls_checked"] == 2 and check["timed_calls_failed"] == 0, (cell, check)
        assert check["free_running_tokens"] > 0, (cell, check)
        # every timed token compared with its prompt's checked call (on the CPU a loop repeats itself exactly)
        assert check["input_sets"] == 3 and check["timed_tokens_compared"] == check["timed_tokens"] > 0, (cell, check)
