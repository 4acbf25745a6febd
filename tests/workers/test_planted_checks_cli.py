"""Bugs planted under the synthetic check, the caches and the energy figure, each met as a user meets it, through a real
`mlcbench sweep` on the CPU (the worker's plants: tests/workers/check_plants/sitecustomize.py):
- leaky-ReLU for ReLU, and one batch row 10 % wrong at b64 in bf16, fail the synthetic check (exit 3): each row is
  judged against eager within 2 x eager's own error against fp32 there, where a whole-tensor 2 % passed both; the
  same models without a bug pass in fp32 and bf16 at batch 1 and 4;
- an energy counter frozen after the calibration gives no figure, and the stored result and the export say why;
- worker code changed under a warm cache (a module attribute of the compiled path) loads none of the old code's
  compiled graphs or eager references: the next process compiles cold and says so, and its bug fails the check."""

import csv
import io
import json
import os
import shutil
import sqlite3
from pathlib import Path

from mlcbench.orchestrator.envs import ENVS_DIR_VARIABLE
from mlcbench.orchestrator.errors import ExitCode

REPO = Path(__file__).resolve().parents[2]
PLANTS = Path(__file__).resolve().parent / "check_plants"
CONFIGS = REPO / "benchmarks" / "suites" / "configs"
SMALL = "hidden_size = 256\nintermediate_size = 704"
# model name -> (its architecture, its bug)
PLANTED = {"leaky-matmul-relu": ("matmul-relu", "leaky_relu"), "leaky-ffn": ("ffn", "leaky_relu"),
           "wrong-row-ffn": ("ffn", "one_row_wrong"), "frozen-counter-ffn": ("ffn", "frozen_energy_counter")}
CORRECT = ("matmul-relu-small", "ffn-small", "ffn-multilayer-small")


def entry(models: list[str], precision: str, batch_sizes: list[int], workflow: str = "torchscript",
          **lengths: int) -> list[str]:
    return ["[[entries]]", f"models = {json.dumps(models)}", f'workflows = ["{workflow}"]',
            f"batch_sizes = {batch_sizes}", f'precision = "{precision}"',
            *(f"{name} = {value}" for name, value in lengths.items()),
            "warmup = 0", "repeats = 2", "repetition = { processes = 1 }"]


def write_suite(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "planted.toml"
    path.write_text("\n".join(['name = "planted"', 'description = "planted bugs"', *lines]) + "\n")
    return path


def stored(tmp_path: Path, db: str = "mlcbench.db") -> dict[tuple[str, str, int], tuple[str, dict]]:
    rows = sqlite3.connect(tmp_path / "results" / db).execute(
        "select model, precision, batch_size, status, result_json from results").fetchall()
    return {(model, precision, batch): (status, json.loads(result)) for model, precision, batch, status, result in rows}


def test_synthetic_bugs_fail_correct_cells_pass_and_a_frozen_counter_says_why_through_the_cli(mlcbench, tmp_path):
    lines = [line for name, (architecture, _) in PLANTED.items()
             for line in (f"[models.{name}]", f'architecture = "{architecture}"', SMALL)]
    lines += entry(["leaky-matmul-relu", "leaky-ffn"], "bf16", [4]) + entry(["leaky-matmul-relu"], "fp32", [1])
    lines += entry(["wrong-row-ffn"], "bf16", [64]) + entry(["frozen-counter-ffn"], "fp32", [1])
    lines += entry(list(CORRECT), "fp32", [1, 4]) + entry(list(CORRECT), "bf16", [1, 4])
    environment = {"PYTHONPATH": os.pathsep.join(filter(None, [str(PLANTS), os.environ.get("PYTHONPATH")])),
                   "MLCBENCH_TEST_PLANTS": json.dumps({name: bug for name, (_, bug) in PLANTED.items()})}
    done = mlcbench("sweep", "--suite", str(write_suite(tmp_path, lines)), "--worker-scope", "round",
                    "--cache-dir", str(tmp_path / "cache"), env=environment, timeout=1200)
    assert done.returncode == ExitCode.JOBS_FAILED, done.stdout + done.stderr
    rows = stored(tmp_path)
    assert all(status == "ok" for status, _ in rows.values()), rows
    checks = {cell: result["correctness"] for cell, (_, result) in rows.items()}
    for cell in [("leaky-matmul-relu", "bf16", 4), ("leaky-ffn", "bf16", 4), ("leaky-matmul-relu", "fp32", 1)]:
        check = checks[cell]
        assert not check["passed"] and check["rel_l2_error"] > check["tolerance"], (cell, check)
    # anchored on eager's own error against fp32 in bf16: far below the whole-tensor 2 % that passed leaky-ReLU
    assert checks[("leaky-ffn", "bf16", 4)]["tolerance"] < 0.006
    wrong_row = checks[("wrong-row-ffn", "bf16", 64)]
    assert not wrong_row["passed"] and wrong_row["worst_row"] == 63, wrong_row
    for model in CORRECT:
        for precision in ("fp32", "bf16"):
            for batch in (1, 4):
                check = checks[(model, precision, batch)]
                assert check["passed"] and check["timed_calls_checked"] == 2 and check["timed_calls_failed"] == 0, \
                    (model, precision, batch, check)
                assert ("against fp32" in check["note"]) if precision == "bf16" else check["tolerance"] == 1e-3
    # the frozen counter: a correct cell, no energy figure, and why, in the store and in the export
    frozen_check, latency = checks[("frozen-counter-ffn", "fp32", 1)], rows[("frozen-counter-ffn", "fp32", 1)][1]
    assert frozen_check["passed"]
    [process] = latency["metrics"]["latency"]["processes"]
    assert process["energy"]["joules"] is None
    assert process["energy"]["reason"].startswith("the energy counter did not move over the window")
    export = mlcbench("export", "--format", "csv", "--model", "frozen-counter-ffn")
    [row] = csv.DictReader(io.StringIO(export.stdout))
    assert row["energy_reason"] == process["energy"]["reason"] and row["joules_per_call"] == ""


LOGIT_SCALE = "LOGIT_SCALE = {}  # planted by the test: the compiled forward's logits scaled\n"


def plant_logit_scale(worker_copy: Path, scale: float) -> None:
    """A module attribute of the compiled path (torch_compile_forward's) that the compiled forward reads: a float,
    whose value no guard of a loaded graph checks."""
    module = worker_copy / "workflows" / "torch_compile_forward.py"
    source = module.read_text()
    if "LOGIT_SCALE = " not in source:
        source = source.replace("def _forward(model, *args, **kwargs):\n"
                                "    return type(model).forward(model, *args, **kwargs)\n",
                                LOGIT_SCALE.format(1.0) + "\n\ndef _forward(model, *args, **kwargs):\n"
                                "    output = type(model).forward(model, *args, **kwargs)\n"
                                "    output.logits = output.logits * LOGIT_SCALE\n"
                                "    return output\n")
    source = "\n".join(LOGIT_SCALE.format(scale).rstrip("\n") if line.startswith("LOGIT_SCALE = ") else line
                       for line in source.split("\n"))
    module.write_text(source)
    assert f"LOGIT_SCALE = {scale}" in module.read_text() and "output.logits * LOGIT_SCALE" in module.read_text()


def test_worker_code_changed_under_a_warm_cache_compiles_cold_and_recomputes_eagers_reference(mlcbench, tmp_path):
    """Two sweeps on one cache folder, each into a store of its own, from a copy of the installed packages (first on
    PYTHONPATH): the first with the copy as it is (a clean compiled forward), the second after one module attribute
    of its compiled path changed. Dynamo's precompile cache would load the first's graphs, whose guards do not check
    a float attribute, and eager's reference cache the first's reference: with the code key held constant in the
    copy, the second sweep was warm (a precompile hit), read the reference and passed with the first's exact error."""
    copy = tmp_path / "code"
    for package in ("schema", "workers", "orchestrator"):
        shutil.copytree(REPO / package, copy / "mlcbench" / package, ignore=shutil.ignore_patterns("__pycache__"))
    plant_logit_scale(copy / "mlcbench" / "workers", 1.0)
    lines = ["[models.llama3-tiny]", f'config = "{CONFIGS / "llama3-tiny"}"']
    lines += entry(["llama3-tiny"], "fp32", [1], "torch_compile_forward", input_len=16, output_len=4)
    lines += entry(["ffn-small"], "bf16", [1])
    suite = write_suite(tmp_path, lines)
    environment = {"PYTHONPATH": os.pathsep.join(filter(None, [str(copy), os.environ.get("PYTHONPATH")])),
                   ENVS_DIR_VARIABLE: str(REPO / "envs")}

    def sweep(db: str):
        done = mlcbench("sweep", "--suite", str(suite), "--worker-scope", "round", "--cache-dir",
                        str(tmp_path / "cache"), env={**environment, "MLCBENCH_DB": f"sqlite:///results/{db}"},
                        timeout=1200)
        assert (tmp_path / "results" / db).exists(), done.stdout + done.stderr
        return done, stored(tmp_path, db)

    done, clean = sweep("clean.db")
    assert done.returncode == ExitCode.OK, done.stdout + done.stderr
    llm, synthetic = clean[("llama3-tiny", "fp32", 1)][1], clean[("ffn-small", "bf16", 1)][1]
    assert llm["metrics"]["compile_cache"] == "cold" and llm["correctness"]["passed"]
    assert synthetic["metrics"]["settings"]["reference"] == "computed"

    plant_logit_scale(copy / "mlcbench" / "workers", 1.25)
    done, changed = sweep("changed.db")
    assert done.returncode == ExitCode.JOBS_FAILED, done.stdout + done.stderr
    llm, synthetic = changed[("llama3-tiny", "fp32", 1)][1], changed[("ffn-small", "bf16", 1)][1]
    counts = llm["metrics"]["cache_counts"]
    assert llm["metrics"]["compile_cache"] == "cold" and not counts["dynamo_precompile_hits"], counts
    assert not llm["correctness"]["passed"] and llm["correctness"]["rel_l2_error"] > 0.2, llm["correctness"]
    assert llm["metrics"]["settings"]["reference"] == "computed"  # not the first sweep's
    assert synthetic["metrics"]["settings"]["reference"] == "computed" and synthetic["correctness"]["passed"]
