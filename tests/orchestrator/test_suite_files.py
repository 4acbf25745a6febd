"""Suites as TOML files: the built-in ones printed and read back, a suite's own models from config folders, the grid
from the command line, --checkpoint checked against the model it replaces, and every bad input one line, exit 2."""

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mlcbench.orchestrator.cli import app
from mlcbench.orchestrator.planner import stored_processes
from mlcbench.orchestrator.store import Store
from mlcbench.orchestrator.suites import builtin_names, get_suite, grid_suite

REPO = Path(__file__).resolve().parents[2]
SUITES = REPO / "benchmarks" / "suites"
OWN_MODELS = SUITES / "own-models.toml"


@pytest.mark.parametrize("name", builtin_names())
def test_a_builtin_suite_printed_and_read_back_gives_the_same_jobs(name, tmp_path):
    shown = CliRunner().invoke(app, ["suites", "--show", name])
    assert shown.exit_code == 0, shown.output
    copy = tmp_path / f"my-{name}.toml"
    copy.write_text(shown.stdout)
    for device in ("cuda", "cpu"):
        builtin = [job.job_id for job in get_suite(name).expand(device)]
        assert builtin and [job.job_id for job in get_suite(str(copy)).expand(device)] == builtin


def test_builtin_job_ids_are_those_of_the_suites_written_in_python():
    # ids computed before the suites became files: a store written then still resumes
    assert get_suite("smoke").expand("cpu")[0].job_id == "a132f2c191c3c37f"
    assert get_suite("paper").expand("cuda")[-1].job_id == "df7d393a83da18ee"
    assert get_suite("decode").expand("cuda")[0].job_id == "9a96fc2679d521df"


def test_own_models_carry_their_config_and_keep_their_ids_wherever_the_file_lies(tmp_path):
    jobs = get_suite(str(OWN_MODELS)).expand("cpu")
    assert {job.model for job in jobs} == {"llama3-tiny", "qwen2-tiny"}
    llama = next(job for job in jobs if job.model == "llama3-tiny")
    assert llama.model_info.hf_config["rope_scaling"]["rope_type"] == "llama3"
    assert llama.model_info.tie_word_embeddings and llama.model_info.head_dim == 32
    assert llama.precision == "fp32"
    moved = tmp_path / "elsewhere"
    shutil.copytree(SUITES, moved, ignore=shutil.ignore_patterns("llama3-8b*"))
    assert [job.job_id for job in get_suite(str(moved / "own-models.toml")).expand("cpu")] == [j.job_id for j in jobs]


def test_the_readme_example_is_the_committed_suite_file():
    # the one TOML example of the README's "Benchmark your own model" is the file the end-to-end tests sweep
    section = (REPO / "README.md").read_text().split("\n## Benchmark your own model\n", 1)[1].split("\n## ", 1)[0]
    assert section.count("```toml\n") == 1
    assert section.split("```toml\n", 1)[1].split("```", 1)[0] == OWN_MODELS.read_text()


def test_the_grid_from_the_command_line_is_a_one_entry_suite():
    suite = grid_suite([str(SUITES / "configs" / "qwen2-tiny"), "llama-2layer"], ["eager", "torch_compile_decode"],
                       [1, 8], 128, 64)
    jobs = suite.expand("cpu")
    assert len(suite.entries) == 1 and len(jobs) == 2 * 2 * 2
    assert {(job.model, job.input_len, job.output_len) for job in jobs} == {("qwen2-tiny", 128, 64),
                                                                            ("llama-2layer", 128, 64)}
    assert {job.batch_size for job in jobs} == {1, 8}


def test_the_grid_from_the_command_line_reaches_the_jobs_it_stores(mlcbench, tmp_path):
    """--model FOLDER --workflow ... --batch-size 1,8 --input-len 128 --output-len 256: one cell per workflow and
    batch, each of those lengths (workflows that refuse LLMs, so the planner stores them without a worker)."""
    folder = _config_folder(tmp_path, max_position_embeddings=512)
    done = mlcbench("sweep", "--model", str(folder), "--workflow", "aot_inductor,torchscript", "--batch-size", "1,8",
                    "--input-len", "128", "--output-len", "256")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "suite command-line" in done.stdout, done.stdout
    jobs = [json.loads(job) for (job,) in sqlite3.connect(tmp_path / "results" / "mlcbench.db").execute(
        "select json_extract(result_json, '$.job') from results")]
    assert sorted((job["model"], job["workflow"], job["batch_size"], job["input_len"], job["output_len"])
                  for job in jobs) == [("model", workflow, batch, 128, 256)
                                       for workflow in ("aot_inductor", "torchscript") for batch in (1, 8)]
    assert all(job["model_info"]["hf_config"]["rope_scaling"]["rope_type"] == "llama3" for job in jobs)


def _suite(tmp_path: Path, body: str) -> str:
    path = tmp_path / "bad.toml"
    path.write_text(body)
    return str(path)


GOOD_ENTRY = '[[entries]]\nmodels = ["tiny"]\nworkflows = ["eager"]\nbatch_sizes = [1]\n'
HEAD = 'name = "bad"\ndescription = "bad"\n'


def _config_folder(tmp_path: Path, **settings) -> Path:
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    base = json.loads((SUITES / "configs" / "llama3-tiny" / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**base, **settings}))
    return folder


BAD_SUITES = {
    "malformed TOML": (lambda tmp: _suite(tmp, HEAD + "[[entries]\n"), "bad.toml: not valid TOML"),
    "an unknown field": (lambda tmp: _suite(tmp, HEAD + '[[entries]]\nmodels = ["ffn-small"]\nworkflows = ["eager"]\n'
                                                 'batch_sizes = [1]\nbatchsize = 4\n'),
                         "bad.toml: entries[0].batchsize: Extra inputs are not permitted"),
    "a config folder without config.json": (
        lambda tmp: (tmp / "empty").mkdir() or _suite(tmp, HEAD + '[models.tiny]\nconfig = "empty"\n' + GOOD_ENTRY),
        ("bad.toml: models.tiny.config: ", "/empty has no config.json")),
    "an architecture transformers does not know": (
        lambda tmp: _config_folder(tmp, model_type="nonsense", architectures=["NonsenseForCausalLM"])
        and _suite(tmp, HEAD + '[models.tiny]\nconfig = "model"\n' + GOOD_ENTRY),
        "architecture NonsenseForCausalLM (model_type 'nonsense'): transformers"),
    "a batch of 0": (lambda tmp: _suite(tmp, HEAD + '[[entries]]\nmodels = ["ffn-small"]\nworkflows = ["eager"]\n'
                                                'batch_sizes = [1, 0]\n'),
                     "bad.toml: entries[0].batch_sizes[1]: Input should be greater than or equal to 1"),
    "an output length beyond the model's maximum positions": (
        lambda tmp: _config_folder(tmp) and _suite(tmp, HEAD + '[models.tiny]\nconfig = "model"\n' + GOOD_ENTRY
                                                   + "output_len = 250\n"),
        "bad.toml: entries[0]: 32 tokens in + 250 out is beyond tiny's 256 positions"),
    "an unknown model": (lambda tmp: _suite(tmp, HEAD + GOOD_ENTRY), "entries[0].models: unknown model 'tiny'"),
    "a typo in a workflow": (lambda tmp: _suite(tmp, HEAD + '[[entries]]\nmodels = ["ffn-small"]\n'
                                                      'workflows = ["eager", "torch_compil"]\nbatch_sizes = [1]\n'),
                             "bad.toml: entries[0].workflows[1]: unknown workflow 'torch_compil'; known: eager"),
    "every problem, not the first": (
        lambda tmp: _suite(tmp, 'name = "bad"\n[[entries]]\nmodels = ["ffn-small"]\nworkflows = ["eagr"]\n'
                                'batch_sizes = [0]\n'),
        ("bad.toml: description: Field required; ", "entries[0].workflows[0]: unknown workflow 'eagr'",
         "entries[0].batch_sizes[0]: Input should be greater than or equal to 1")),
}


@pytest.mark.parametrize("make, message", BAD_SUITES.values(), ids=BAD_SUITES.keys())
def test_a_bad_suite_file_is_one_error_line_exit_2_and_nothing_stored(mlcbench, tmp_path, make, message):
    done = mlcbench("sweep", "--suite", make(tmp_path))
    assert done.returncode == 2, done.stdout + done.stderr
    parts = (message,) if isinstance(message, str) else message
    assert done.stderr.startswith("error: ") and all(part in done.stderr for part in parts), done.stderr
    assert done.stderr.strip().count("\n") == 0
    assert not (tmp_path / "results").exists()


def test_suites_show_prints_a_suite_file_and_names_its_problems(tmp_path):
    shown = CliRunner().invoke(app, ["suites", "--show", str(OWN_MODELS)])
    assert shown.exit_code == 0 and shown.stdout == OWN_MODELS.read_text(), shown.output
    bad = _suite(tmp_path, 'name = "bad"\n')
    refused = CliRunner().invoke(app, ["suites", "--show", bad])
    assert refused.exit_code == 2 and refused.stderr.startswith(f"error: {bad}: description: Field required; entries")
    missing = CliRunner().invoke(app, ["suites", "--show", str(tmp_path / "none.toml")])
    assert missing.exit_code == 2 and "none.toml: no such file" in missing.stderr


@pytest.mark.parametrize("args, message", [
    (["--model", "/nonexistent/folder", "--workflow", "eager"], "'/nonexistent/folder' is neither a folder nor"),
    (["--suite", "tiny", "--workflow", "eagr"], "--workflow: unknown workflow 'eagr'; known: eager"),
    (["--model", str(SUITES / "configs" / "llama3-tiny"), "--workflow", "eager,torch_compil"],
     "--workflow: unknown workflow 'torch_compil'"),
    (["--model", "llama-2layer", "--workflow", "eager", "--output-len", "600"], "beyond llama-2layer's 512 positions"),
    (["--model", "llama-2layer", "--input-len", "8"], "a grid from the command line needs --workflow"),
    (["--suite", "smoke", "--output-len", "8"], "--input-len/--output-len make a grid of their own"),
    (["--suite", "smoke", "--model", "llama-2layer", "--checkpoint", "tinyllama-1.1b=/tmp"],
     "--checkpoint tinyllama-1.1b=/tmp: not a model of this sweep"),
    (["--suite", "smoke", "--checkpoint", "llama-2layer=/a", "--checkpoint", "llama-2layer=/b"], "given twice"),
])
def test_bad_grid_and_checkpoint_options_are_exit_2(mlcbench, tmp_path, args, message):
    done = mlcbench("sweep", *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("error: ") and message in done.stderr, done.stderr
    assert done.stderr.strip().count("\n") == 0
    assert not (tmp_path / "results").exists()


def test_a_checkpoint_of_another_shape_is_refused_naming_each_difference(mlcbench, tmp_path):
    folder = _config_folder(tmp_path)  # llama3-tiny's config: not llama-2layer's dims
    done = mlcbench("sweep", "--suite", "smoke", "--model", "llama-2layer", "--checkpoint", f"llama-2layer={folder}")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "hidden_size 64 (not 256)" in done.stderr and "tie_word_embeddings True (not False)" in done.stderr
    assert f"--model {folder}" in done.stderr  # how to run it as a model of its own
    gpt2 = tmp_path / "gpt2"
    gpt2.mkdir()
    (gpt2 / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_embd": 256, "n_layer": 2, "n_head": 8,
                                                  "vocab_size": 32000}))
    done = mlcbench("sweep", "--suite", "smoke", "--model", "llama-2layer", "--checkpoint", f"llama-2layer={gpt2}")
    assert done.returncode == 2 and "model_type 'gpt2' (not 'llama')" in done.stderr, done.stderr
    assert not (tmp_path / "results").exists()


def test_own_models_run_end_to_end_correct_against_eager_and_unsupported_with_the_reason(mlcbench, tmp_path,
                                                                                         gpt2_suite):
    """The README's example, at batch 1: eager, torch_compile_static and torch_compile_decode on a Llama-3-style and a
    Qwen2-style model from their config folders, in the local env, each checked against eager token by token
    (teacher-forced); then a GPT-2 from its config folder, which eager runs and the compiled decode loop refuses,
    naming the architecture."""
    done = mlcbench("sweep", "--suite", str(OWN_MODELS), "--batch-size", "1", timeout=1500)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = sqlite3.connect(tmp_path / "results" / "mlcbench.db").execute(
        "select model, workflow, status, result_json from results").fetchall()
    assert {(model, workflow, status) for model, workflow, status, _ in rows} == {
        (model, workflow, "ok") for model in ("llama3-tiny", "qwen2-tiny")
        for workflow in ("eager", "torch_compile_static", "torch_compile_decode")}
    for model, workflow, _, result_json in rows:
        result = json.loads(result_json)
        assert result["job"]["model_info"]["hf_config"]["model_type"] in ("llama", "qwen2")
        if workflow != "eager":
            assert result["correctness"]["method"] == "teacher_forced", (model, workflow, result["correctness"])
            assert result["correctness"]["passed"], (model, workflow, result["correctness"])
    done = mlcbench("sweep", "--suite", str(gpt2_suite), "--db", f"sqlite:///{tmp_path / 'gpt2.db'}")
    assert done.returncode == 0, done.stdout + done.stderr
    stored = {workflow: json.loads(result_json) for workflow, result_json in sqlite3.connect(
        tmp_path / "gpt2.db").execute("select workflow, result_json from results")}
    assert {workflow: result["status"] for workflow, result in stored.items()} == {
        "eager": "ok", "torch_compile_decode": "unsupported"}
    assert "architecture GPT2LMHeadModel is not implemented" in stored["torch_compile_decode"]["reason"], stored


def test_the_weights_a_row_used_are_in_its_table_row_and_csv():
    from rich.console import Console

    from mlcbench.orchestrator.reports.export import to_csv
    from mlcbench.orchestrator.reports.tables import results_table
    from mlcbench.schema import JobSpec, Result

    random = JobSpec(model="llama-2layer", workflow="eager", precision="fp32", batch_size=1, device="cpu")
    real = random.model_copy(update={"model_path": "/models/ckpt-a"})
    rows = [Result.without_run(job, "unsupported", "why") for job in (random, real)]
    csv = to_csv(rows).splitlines()
    weights = csv[0].split(",").index("weights")
    assert [line.split(",")[weights] for line in csv[1:]] == ["random (seed 0)", "/models/ckpt-a"]
    console = Console(width=400, record=True)
    console.print(results_table(rows))
    assert "llama-2layer (weights /models/ckpt-a)" in console.export_text()
    assert real.job_id != random.job_id  # a cell of its own


def test_a_report_names_the_weights_of_a_checkpoint_cell_beside_the_random_one():
    from mlcbench.orchestrator.reports.data import CellKey
    from mlcbench.orchestrator.reports.markdown import markdown
    from mlcbench.orchestrator.reports.report import build_report
    from mlcbench.orchestrator.reports.selection import Selection
    from tests.reports.conftest import make_result

    random = make_result("tinyllama-1.1b", "eager", 1, "h100", "local", tokens_per_s=50.0)
    job = random.job.model_copy(update={"model_path": "/models/ckpt-a"})
    real = random.model_copy(update={"job": job, "job_id": job.job_id})
    assert CellKey.of(real) != CellKey.of(random)
    headings = [line for line in markdown(build_report([random, real], "test", Selection())).splitlines()
                if line.startswith("**tinyllama-1.1b (bf16) on h100, env local: tokens/s;")]
    assert len(headings) == 2 and ["weights /models/ckpt-a" in line for line in headings].count(True) == 1, headings


def test_a_layout_the_catalog_does_not_count_has_no_decode_bound_stored_or_reported():
    """A GPT-2 on an H100: no % of the decode bound is stored, given in a table or drawn in the decode section, where
    a Llama-3-style own model of the same timings has one (its bytes counted from its config)."""
    from mlcbench.orchestrator.reports.data import spec_fraction
    from mlcbench.orchestrator.reports.sections.decode import decode_lines
    from mlcbench.orchestrator.store.provenance import finish
    from mlcbench.schema.hf_config import llm_from_hf_config
    from tests.conftest import GPT2_TINY_CONFIG
    from tests.reports.conftest import make_result

    def on_h100(settings: dict):
        base = make_result("tinyllama-1.1b", "eager", 1, "h100", "local", tokens_per_s=50.0)
        job = base.job.model_copy(update={"model": settings["model_type"], "model_info": llm_from_hf_config(settings)})
        metrics = base.metrics.model_copy(update={"tpot_ms": 2.0, "bandwidth_fraction": None})
        return finish(base.model_copy(update={"job": job, "job_id": job.job_id, "metrics": metrics}), "local", "h100",
                      None, None)

    llama = on_h100(json.loads((SUITES / "configs" / "llama3-tiny" / "config.json").read_text()))
    gpt2 = on_h100(GPT2_TINY_CONFIG)
    assert llama.metrics.bandwidth_fraction > 0 and spec_fraction(llama) > 0
    assert gpt2.metrics.bandwidth_fraction is None and spec_fraction(gpt2) is None
    assert [line.model for line in decode_lines([llama, gpt2])] == ["llama"]


def test_a_model_id_is_read_from_the_local_hugging_face_cache_only(mlcbench, tmp_path):
    cache = tmp_path / "hub"
    snapshot = cache / "models--someone--qwen2-tiny" / "snapshots" / "0123abc"
    snapshot.mkdir(parents=True)
    shutil.copy(SUITES / "configs" / "qwen2-tiny" / "config.json", snapshot / "config.json")
    (cache / "models--someone--qwen2-tiny" / "refs").mkdir()
    (cache / "models--someone--qwen2-tiny" / "refs" / "main").write_text("0123abc")
    offline = {"HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    done = mlcbench("sweep", "--model", "someone/qwen2-tiny", "--workflow", "eager", "--output-len", "2",
                    "--db", f"sqlite:///{tmp_path / 'cached.db'}", env=offline)
    assert done.returncode == 0, done.stdout + done.stderr
    [(model, status)] = sqlite3.connect(tmp_path / "cached.db").execute("select model, status from results").fetchall()
    assert (model, status) == ("someone--qwen2-tiny", "ok")
    missing = mlcbench("sweep", "--model", "someone/not-cached", "--workflow", "eager", "--output-len", "2", env=offline)
    assert missing.returncode == 2 and "nor in the local Hugging Face cache" in missing.stderr, missing.stderr


def test_a_synthetic_model_of_the_suites_own_runs_and_the_list_of_suites_names_every_file(mlcbench, tmp_path):
    suite = _suite(tmp_path, HEAD + '[models.wide-ffn]\narchitecture = "ffn"\nhidden_size = 96\n'
                             'intermediate_size = 384\n[[entries]]\nmodels = ["wide-ffn"]\nworkflows = ["eager"]\n'
                             'batch_sizes = [2]\nrepetition = { processes = 1 }\n')
    done = mlcbench("sweep", "--suite", suite)
    assert done.returncode == 0, done.stdout + done.stderr
    [(result_json,)] = sqlite3.connect(tmp_path / "results" / "mlcbench.db").execute(
        "select result_json from results").fetchall()
    result = json.loads(result_json)
    assert result["status"] == "ok" and result["job"]["model_info"]["intermediate_size"] == 384
    listed = CliRunner().invoke(app, ["suites"])
    assert listed.exit_code == 0 and all(f"{name}:" in listed.stdout for name in builtin_names())


def test_a_checkpoint_with_the_config_of_a_suites_own_model_gives_it_real_weights(mlcbench, tmp_path):
    from transformers import AutoConfig, AutoModelForCausalLM

    settings = json.loads((SUITES / "configs" / "qwen2-tiny" / "config.json").read_text())
    folder = tmp_path / "qwen2-checkpoint"
    AutoModelForCausalLM.from_config(AutoConfig.for_model(**settings)).save_pretrained(folder)
    done = mlcbench("sweep", "--suite", str(OWN_MODELS), "--model", "qwen2-tiny", "--workflow", "eager",
                    "--batch-size", "1", "--checkpoint", f"qwen2-tiny={folder}")
    assert done.returncode == 0, done.stdout + done.stderr
    [(result_json,)] = sqlite3.connect(tmp_path / "results" / "mlcbench.db").execute(
        "select result_json from results").fetchall()
    result = json.loads(result_json)
    assert result["status"] == "ok" and result["job"]["model_path"] == str(folder.resolve())


def swept_on_the_cpu(mlcbench, tmp_path, suite_text: str) -> tuple[str, list]:
    """A suite file in tmp_path swept in the local env on the CPU with its own cache folder: the sweep's output and
    the stored cells."""
    suite = tmp_path / "suite.toml"
    suite.write_text(suite_text)
    done = mlcbench("sweep", "--suite", str(suite), "--env", "local", "--gpu", "cpu", "--cache-dir",
                    str(tmp_path / "cache"))
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout, Store(f"sqlite:///{tmp_path / 'results' / 'mlcbench.db'}", create=False).cells()


def test_a_tied_embedding_model_starts_warm_from_its_cold_process_s_caches(mlcbench, tmp_path):
    """torch_compile_static of llama3-tiny (tied embeddings): a cold process compiles into the cache folder, and the
    next ones load from it. They failed to: the guard that embed_tokens.weight is lm_head.weight could not be built
    from the precompile cache ("'_Missing' object has no attribute '_parameters'")."""
    shutil.copytree(SUITES / "configs" / "llama3-tiny", tmp_path / "configs" / "llama3-tiny")
    stdout, (cell,) = swept_on_the_cpu(mlcbench, tmp_path, (
        'name = "tied"\ndescription = "tied embeddings, warm"\n[models.llama3-tiny]\n'
        'config = "configs/llama3-tiny"\nprecision = "fp32"\n[[entries]]\nmodels = ["llama3-tiny"]\n'
        'workflows = ["torch_compile_static"]\nbatch_sizes = [1]\ninput_len = 8\noutput_len = 4\n'
        'warmup = 0\nrepeats = 1\nrepetition = { processes = 2 }\n'))
    assert "0 failed check(s) · 0 lost process(es)" in stdout
    # the cold process stands in the figure's series or, when its timing parts from the warm ones, in other_series
    assert sorted(process.compile_cache for process in stored_processes(cell)) == ["cold", "warm", "warm"]


def test_a_sliding_window_model_through_the_static_recipe_matches_eager_cold_and_warm(mlcbench, tmp_path):
    """A Mistral-style model (sliding window 64 over 32 + 32 positions): torch_compile_static's logits parted from
    eager's (relative L2 0.19-0.55) while the warm-start guard filter dropped the guard on the Python int that
    transformers' sliding-window cache counts its tokens in. Now its check passes, in the cold and the warm process."""
    folder = tmp_path / "configs" / "mistral-tiny"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 64,
        "intermediate_size": 160, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 16, "vocab_size": 512, "max_position_embeddings": 256, "rms_norm_eps": 1e-05,
        "hidden_act": "silu", "rope_theta": 10000.0, "sliding_window": 64, "tie_word_embeddings": False,
        "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32"}))
    _, swept = swept_on_the_cpu(mlcbench, tmp_path, (
        'name = "mistral"\ndescription = "sliding window"\n[models.mistral-tiny]\n'
        'config = "configs/mistral-tiny"\n[[entries]]\nmodels = ["mistral-tiny"]\n'
        'workflows = ["eager", "torch_compile_static"]\nbatch_sizes = [1]\ninput_len = 32\n'
        'output_len = 32\nwarmup = 0\nrepeats = 1\nrepetition = { processes = 2 }\n'))
    cells = {cell.job.workflow: cell for cell in swept}
    static = cells["torch_compile_static"]
    assert static.correctness.passed and static.correctness.processes_checked >= 2, static.correctness
    assert "warm" in [process.compile_cache for process in static.metrics.latency.processes]
