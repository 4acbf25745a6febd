import sqlite3

import pytest

FAST_FILTER = ["--model", "matmul-small", "--workflow", "eager", "--batch-size", "1"]


@pytest.mark.parametrize("args, message", [
    (["sweep", "--suite", "nope"], "unknown suite 'nope'"),
    (["sweep", "--model", "gpt-9"], "unknown model 'gpt-9'"),
    (["sweep", "--workflow", "magic"], "unknown workflow 'magic'"),
    (["sweep", "--env", "nope"], "unknown env 'nope'"),
    (["sweep", "--gpu", "gtx480"], "unknown GPU tag 'gtx480'"),
    (["sweep", "--gpu", "h100"], "contradicts this host"),
    (["sweep", "--db", "nosuchdialect://x"], "cannot use --db"),
    (["sweep", "--checkpoint", "tinyllama-1.1b"], "expected MODEL=FOLDER"),
    (["sweep", "--checkpoint", "ffn-small=/tmp"], "not an LLM of the catalog"),
    (["sweep", "--checkpoint", "llama-2layer=/nonexistent"], "no config.json there"),
])
def test_bad_input_is_one_line_exit_2_and_nothing_written(mlcbench, tmp_path, args, message):
    done = mlcbench(*args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("error: ") and message in done.stderr
    assert done.stderr.strip().count("\n") == 0
    assert "secret" not in done.stderr
    assert not (tmp_path / "results").exists()


def test_sweep_stores_tagged_rows_and_a_second_run_does_no_work(mlcbench, tmp_path):
    first = mlcbench("sweep", *FAST_FILTER)
    assert first.returncode == 0, first.stderr
    assert "matmul-small" in first.stdout
    rows = sqlite3.connect(tmp_path / "results" / "mlcbench.db").execute(
        "select env, gpu_tag, status, model, workflow from results").fetchall()
    assert rows == [("local", "cpu", "ok", "matmul-small", "eager")]

    second = mlcbench("sweep", *FAST_FILTER)
    assert second.returncode == 0, second.stderr
    assert "· 1 skipped (already stored" in second.stdout
    assert "worker" not in second.stdout
    assert sqlite3.connect(tmp_path / "results" / "mlcbench.db").execute("select count(*) from results").fetchone() == (1,)

    listed = mlcbench("results", "--workflow", "eager")
    assert listed.returncode == 0 and "matmul-small" in listed.stdout
    empty = mlcbench("results", "--workflow", "torchax")
    assert empty.returncode == 0 and "no stored results match" in empty.stdout


def test_a_checkpoint_folder_becomes_the_llm_jobs_model_path(mlcbench, tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM

    from mlcbench.schema import MODELS
    from mlcbench.workers.models.llm import llama_config

    folder = tmp_path / "tiny-checkpoint"
    LlamaForCausalLM(LlamaConfig(**llama_config(MODELS["llama-2layer"]).to_dict())).save_pretrained(folder)
    done = mlcbench("sweep", "--model", "llama-2layer", "--workflow", "eager", "--checkpoint", f"llama-2layer={folder}")
    assert done.returncode == 0, done.stderr
    [(result_json,)] = sqlite3.connect(tmp_path / "results" / "mlcbench.db").execute(
        "select result_json from results").fetchall()
    assert f'"model_path":"{folder}"' in result_json and '"status":"ok"' in result_json


def test_rerun_runs_stored_jobs_again(mlcbench, tmp_path):
    assert mlcbench("sweep", *FAST_FILTER).returncode == 0
    again = mlcbench("sweep", *FAST_FILTER, "--rerun")
    assert again.returncode == 0 and "skipped" not in again.stdout
    assert sqlite3.connect(tmp_path / "results" / "mlcbench.db").execute("select status from results").fetchall() \
        == [("ok",), ("ok",)]
    assert list((tmp_path / "results" / "work").iterdir()) == []  # ended without failures: work folders removed
