"""The eager reference cache (workers/measurement/references.py): a later process with the same key reads the
reference an earlier one computed and checks alike; a reference stored under any other key, or a file that is
truncated, garbage or not a reference, is never read: it is computed again and replaced; the switch off computes it in
every process and writes nothing; concurrent writers of one key leave one valid file."""

import json
import os
import shutil
import subprocess
import sys
import threading
from contextlib import nullcontext
from pathlib import Path

import pytest
import torch

from mlcbench.schema import GpuInfo, JobSpec, Result
from mlcbench.schema.hf_config import llm_from_hf_config
from mlcbench.schema.protocol import REFERENCE_CACHE_ENV
from mlcbench.workers.interface import WorkflowContext
from mlcbench.workers.measurement import llm as llm_kind
from mlcbench.workers.measurement import references
from mlcbench.workers.measurement.llm import LLM
from mlcbench.workers.measurement.references import FOLDER, ReferenceCache, ReferenceKey
from mlcbench.workers.measurement.synthetic import Synthetic
from mlcbench.workers.runner import run_job

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
TINY_LLAMA = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512, "max_position_embeddings": 256,
              "bos_token_id": 1, "eos_token_id": 2}


def synthetic_job(**overrides) -> JobSpec:
    return JobSpec(**{"model": "ffn-small", "workflow": "torchscript", "precision": "fp32", "batch_size": 2,
                      "device": "cpu", "warmup": 1, "repeats": 2, **overrides})


def llm_job(**overrides) -> JobSpec:
    return JobSpec(**{"model": "llama-2layer", "workflow": "torch_compile_decode", "precision": "bf16",
                      "batch_size": 2, "input_len": 8, "output_len": 4, "device": "cpu", "warmup": 0, "repeats": 1,
                      **overrides})


def own_llm_job(**config_overrides) -> JobSpec:
    return llm_job(model="own", model_info=llm_from_hf_config({**TINY_LLAMA, **config_overrides}, "bf16"))


def provided(job: JobSpec, cache_root: Path) -> tuple[dict, dict]:
    """The job's reference state and notes as measure() gets them: its model built, the reference through the
    cache."""
    ctx = WorkflowContext(job=job, device=torch.device(job.device), dtype=DTYPES[job.precision],
                          cache_dir=cache_root / job.workflow)
    kind = LLM(job.info, ctx) if job.info.kind == "llm" else Synthetic(job.info, ctx)
    kind.build()
    notes: dict = {}
    with torch.no_grad():
        state = ReferenceCache.under(cache_root).provide(job, lambda own: kind.reference(nullcontext, own), notes)
    return state, notes


def stored_files(cache_root: Path) -> list[Path]:
    return sorted((cache_root / FOLDER).iterdir()) if (cache_root / FOLDER).exists() else []


def assert_same_state(one: dict, other: dict) -> None:
    assert one.keys() == other.keys()
    for name, value in one.items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(value.cpu(), other[name].cpu()), name
        else:
            assert value == other[name], name


# run_job in a fresh Python process, as a worker runs its jobs; the decode loop's steps left uncompiled (Inductor on
# this CPU takes ~90 s a shape; the reference is eager's either way)
IN_A_FRESH_PROCESS = """
import sys
from pathlib import Path
from mlcbench.schema import JobSpec
from mlcbench.workers.decode import compiled_step
from mlcbench.workers.runner import run_job
compiled_step.compile_for_warm_start = lambda function, **options: function
for line in sys.stdin:
    print(run_job(JobSpec.model_validate_json(line), Path(sys.argv[1])).model_dump_json())
"""


def in_a_fresh_process(jobs: list[JobSpec], cache_root: Path) -> list[Result]:
    done = subprocess.run([sys.executable, "-c", IN_A_FRESH_PROCESS, str(cache_root)], capture_output=True, text=True,
                          check=True, input="".join(job.model_dump_json() + "\n" for job in jobs))
    return [Result.model_validate_json(line) for line in done.stdout.splitlines() if line.startswith("{")]


def test_a_second_process_reads_the_reference_the_first_computed_and_checks_alike(tmp_path):
    jobs = [synthetic_job(precision="bf16"), llm_job()]
    first, second = in_a_fresh_process(jobs, tmp_path), in_a_fresh_process(jobs, tmp_path)
    for computed, read in zip(first, second):
        assert computed.status == read.status == "ok", (computed.error, read.error)
        assert computed.metrics.settings["reference"] == "computed"
        assert read.metrics.settings["reference"] == "read from cache"
        assert read.metrics.settings["reference_s"] >= 0
        assert read.correctness == computed.correctness and read.correctness.passed
    # the bf16 LLM's check widened its tolerance by eager's error against the fp32 reference, read back too
    assert "against fp32" in second[1].correctness.note
    assert len(stored_files(tmp_path)) == 2


def test_the_reference_read_is_what_the_check_compares_against(tmp_path):
    job = synthetic_job()
    state, _ = provided(job, tmp_path)
    key = ReferenceKey.of(job)
    references._write(tmp_path / FOLDER / key.file_name(), key, {**state, "expected": 2 * state["expected"]}, {})
    result = run_job(job, tmp_path)
    assert result.metrics.settings["reference"] == "read from cache"
    assert not result.correctness.passed and result.correctness.rel_l2_error == pytest.approx(0.5)


# each case: the job whose reference is stored first, and the change of one key field (of the job, or of the
# environment it runs in) that must keep it from being read
def _patch(target, name, value):
    return lambda monkeypatch: monkeypatch.setattr(target, name, value)


KEY_CHANGES = {
    "seed": (synthetic_job(), synthetic_job(seed=1), None),
    "batch_size": (synthetic_job(), synthetic_job(batch_size=3), None),
    "input_len": (synthetic_job(), synthetic_job(input_len=16), None),
    "output_len": (llm_job(), llm_job(output_len=5), None),
    "precision": (synthetic_job(), synthetic_job(precision="bf16"), None),
    "model": (synthetic_job(), synthetic_job(model="matmul-small"), None),
    "model_definition": (own_llm_job(), own_llm_job(rms_norm_eps=1e-6), None),
    "torch": (synthetic_job(), synthetic_job(), _patch(torch, "__version__", "2.5.1")),
    "cuda": (synthetic_job(), synthetic_job(), _patch(torch.version, "cuda", "12.4")),
    "transformers": (synthetic_job(), synthetic_job(),
                     _patch(references, "package_versions", lambda: {"transformers": "4.48.0"})),
    "python": (synthetic_job(), synthetic_job(), _patch(references.platform, "python_version", lambda: "3.10.12")),
    "worker_code": (synthetic_job(), synthetic_job(), _patch(references, "worker_code", lambda: "0" * 64)),
}


@pytest.mark.parametrize("field", KEY_CHANGES)
def test_a_reference_stored_for_another_key_is_never_read(tmp_path, monkeypatch, field):
    base, changed, change_environment = KEY_CHANGES[field]
    _, notes = provided(base, tmp_path)
    assert notes["reference"] == "computed"
    [base_file] = stored_files(tmp_path)
    if change_environment is not None:
        change_environment(monkeypatch)
    key = ReferenceKey.of(changed)
    base_key = ReferenceKey.model_validate_json(torch.load(base_file, weights_only=True)["key"])
    assert key.differences(base_key) == (["model", "model_definition"] if field == "model" else [field])
    state, notes = provided(changed, tmp_path)
    assert notes["reference"] == "computed"  # a file of its own name: the other key's is not it
    # the other key's file under this key's name (stale, or tampered with) is refused by the key it holds
    shutil.copyfile(base_file, tmp_path / FOLDER / key.file_name())
    recomputed, notes = provided(changed, tmp_path)
    assert notes["reference"].startswith("recomputed: stored for another ") and field in notes["reference"]
    assert_same_state(recomputed, state)
    read, notes = provided(changed, tmp_path)  # the file was replaced by this key's
    assert notes["reference"] == "read from cache"
    assert_same_state(read, state)


def test_a_checkpoint_folder_is_keyed_by_its_path_and_its_files_sizes_and_mtimes(tmp_path):
    folder = tmp_path / "checkpoint"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    weights = folder / "model.safetensors"
    weights.write_bytes(b"\0" * 64)
    job = llm_job(model_path=str(folder))
    key = ReferenceKey.of(job)
    assert [file.name for file in key.checkpoint_files] == ["config.json", "model.safetensors"]
    weights.write_bytes(b"\0" * 65)
    resized = ReferenceKey.of(job)
    assert key.differences(resized) == ["checkpoint_files"]
    os.utime(weights, ns=(0, 0))
    assert resized.differences(ReferenceKey.of(job)) == ["checkpoint_files"]
    moved = folder.rename(tmp_path / "elsewhere")
    assert "checkpoint" in ReferenceKey.of(llm_job(model_path=str(moved))).differences(ReferenceKey.of(job))
    assert ReferenceKey.of(llm_job()).checkpoint is None


def test_a_gpu_is_keyed_by_its_uuid(monkeypatch):
    job = synthetic_job(device="cuda")
    monkeypatch.setattr(references, "gpu_info", lambda: GpuInfo(name="NVIDIA H100", uuid="GPU-aaaa"))
    one = ReferenceKey.of(job)
    monkeypatch.setattr(references, "gpu_info", lambda: GpuInfo(name="NVIDIA H100", uuid="GPU-bbbb"))
    assert one.gpu_uuid == "GPU-aaaa" and one.differences(ReferenceKey.of(job)) == ["gpu_uuid"]


def test_a_models_definition_is_hashed_canonically():
    """The same config in another key order is the same model; the catalog's models differ by their dims."""
    reordered = dict(reversed(list(TINY_LLAMA.items())))
    job = own_llm_job()
    same = llm_job(model="own", model_info=llm_from_hf_config(reordered, "bf16"))
    assert ReferenceKey.of(job) == ReferenceKey.of(same)
    assert ReferenceKey.of(synthetic_job(model="ffn-small")).model_definition != \
        ReferenceKey.of(synthetic_job(model="ffn-multilayer-small")).model_definition


def _truncated(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])


def _other_torch_file(path: Path) -> None:
    torch.save({"expected": torch.zeros(3)}, path)


def _unreadable_key(path: Path) -> None:
    stored = torch.load(path, weights_only=True)
    torch.save({**stored, "key": json.dumps({"model": "ffn-small"})}, path)


def _not_plain_values(path: Path) -> None:
    stored = torch.load(path, weights_only=True)
    torch.save({**stored, "notes": {"reference": Path("not a plain value")}}, path)


SPOILED = {
    "truncated": (_truncated, "recomputed: unreadable"),
    "garbage": (lambda path: path.write_bytes(os.urandom(4096)), "recomputed: unreadable"),
    "empty": (lambda path: path.write_bytes(b""), "recomputed: unreadable"),
    "objects weights_only refuses": (_not_plain_values, "recomputed: unreadable (UnpicklingError)"),
    "another torch file": (_other_torch_file, "recomputed: not a reference file"),
    "a key of another shape": (_unreadable_key, "recomputed: its key is unreadable"),
}


@pytest.mark.parametrize("spoil", SPOILED)
def test_a_spoiled_file_is_never_read_but_recomputed_and_replaced(tmp_path, spoil):
    job = synthetic_job()
    state, _ = provided(job, tmp_path)
    [path] = stored_files(tmp_path)
    how, why = SPOILED[spoil]
    how(path)
    recomputed, notes = provided(job, tmp_path)
    assert notes["reference"].startswith(why)
    assert_same_state(recomputed, state)
    read, notes = provided(job, tmp_path)
    assert notes["reference"] == "read from cache"
    assert_same_state(read, state)
    assert stored_files(tmp_path) == [path]


def test_a_reference_that_cannot_be_stored_is_used_and_the_note_says_why(tmp_path):
    (tmp_path / FOLDER).write_text("a file where the folder should be")
    job = synthetic_job()
    _, notes = provided(job, tmp_path)
    assert notes["reference_store_error"].startswith(("FileExistsError", "NotADirectoryError"))
    result = run_job(job, tmp_path)
    assert result.status == "ok" and result.correctness.passed and "reference_store_error" in result.metrics.settings


def test_with_the_switch_off_every_process_computes_its_reference_and_none_is_read_or_written(tmp_path, monkeypatch):
    job = synthetic_job()
    assert run_job(job, tmp_path).metrics.settings["reference"] == "computed"
    [stored] = stored_files(tmp_path)
    written = stored.stat().st_mtime_ns
    monkeypatch.setenv(REFERENCE_CACHE_ENV, "0")
    for _ in range(2):
        result = run_job(job, tmp_path)
        assert result.status == "ok" and result.correctness.passed
        assert result.metrics.settings["reference"] == "computed, cache off"
    assert stored_files(tmp_path) == [stored] and stored.stat().st_mtime_ns == written


def test_an_fp32_reference_that_did_not_fit_is_cached_with_its_note(tmp_path, monkeypatch):
    def did_not_fit(model, prompt, reference, ctx, notes):
        notes["fp32_reference"] = "did not fit: fixed tolerance"
        return None

    monkeypatch.setattr(llm_kind, "_fp32_logits", did_not_fit)
    state, notes = provided(llm_job(), tmp_path)
    assert state["gold_logits"] is None and notes["fp32_reference"] == "did not fit: fixed tolerance"

    def retried(*args):
        raise AssertionError("a later process tried the fp32 weights again")

    monkeypatch.setattr(llm_kind, "_fp32_logits", retried)
    read, notes = provided(llm_job(), tmp_path)
    assert notes["reference"] == "read from cache" and notes["fp32_reference"] == "did not fit: fixed tolerance"
    assert read["gold_logits"] is None and torch.equal(read["step_logits"], state["step_logits"])


def test_concurrent_writers_of_one_key_leave_one_valid_file(tmp_path):
    job, writers = synthetic_job(), 6
    states = [{"expected": torch.full((512, 1024), float(writer))} for writer in range(writers)]
    # every writer computes before any has written: all find no file, and all write at once
    all_computed = threading.Barrier(writers)
    notes = [{} for _ in range(writers)]

    def write(writer: int) -> None:
        def compute(own_notes: dict) -> dict:
            all_computed.wait()
            return states[writer]

        ReferenceCache.under(tmp_path).provide(job, compute, notes[writer])

    threads = [threading.Thread(target=write, args=(writer,)) for writer in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [note["reference"] for note in notes] == ["computed"] * writers
    assert all("reference_store_error" not in note for note in notes)
    assert [path.name for path in (tmp_path / FOLDER).iterdir()] == [ReferenceKey.of(job).file_name()]  # no temp
    read, notes = provided(job, tmp_path)
    assert notes["reference"] == "read from cache"
    assert any(torch.equal(read["expected"], state["expected"]) for state in states)


# writes one key's reference again and again, its tensor filled with argv[3]
KEEP_WRITING = """
import sys
from pathlib import Path
import torch
from mlcbench.schema import JobSpec
from mlcbench.workers.measurement import references
job = JobSpec.model_validate_json(sys.argv[2])
key = references.ReferenceKey.of(job)
for _ in range(30):
    references._write(Path(sys.argv[1]) / references.FOLDER / key.file_name(), key,
                      {"expected": torch.full((512, 512), float(sys.argv[3]))}, {})
"""


def test_a_file_written_by_other_processes_is_never_read_half_written(tmp_path):
    job = synthetic_job()
    key = ReferenceKey.of(job)
    path = tmp_path / FOLDER / key.file_name()
    writers = [subprocess.Popen([sys.executable, "-c", KEEP_WRITING, str(tmp_path), job.model_dump_json(), str(value)])
               for value in (1, 2)]
    reads, refused = 0, []
    while any(writer.poll() is None for writer in writers):
        try:
            state, _ = references._read(path, key)
        except FileNotFoundError:
            continue
        except references._Refused as why:
            refused.append(str(why))
            continue
        reads += 1
        assert state["expected"].unique().tolist() in ([1.0], [2.0])
    assert [writer.returncode for writer in writers] == [0, 0]
    assert refused == [] and reads > 0
    assert [entry.name for entry in path.parent.iterdir()] == [path.name]  # no temporary file left behind
