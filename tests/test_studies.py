"""The studies behind the figures the README and docs quote: each quoted study exists, its manifest's figure
recomputes from its store with the reports' own code, the answer quotes that figure, the index is the manifests', and
benchmarks/ holds what a user runs and the studies, nothing dated."""

import importlib.util
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from mlcbench.orchestrator.sweep.sharing import lifetimes_overlap, overlapping_windows, processes_of

REPO = Path(__file__).resolve().parents[1]
# a repository tool, not part of the package: loaded from its file
_SPEC = importlib.util.spec_from_file_location("studies", REPO / "tools" / "studies.py")
studies = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(studies)
STUDIES = studies.studies()


def test_there_are_studies():
    assert {"decode-memory-limit", "decode-kernels", "warm-start", "crossgen", "container-h200", "energy-h200"} <= set(STUDIES)


@pytest.mark.parametrize("name", STUDIES)
def test_a_study_s_figure_recomputes_from_its_store_and_its_answer_quotes_it(name):
    manifest = STUDIES[name]
    folder = studies.STUDIES / name
    assert (folder / manifest.store).is_file() and (folder / manifest.report).is_file()
    assert studies.recomputed(folder, manifest) == manifest.figure
    assert manifest.figure.text() in manifest.answer


@pytest.mark.parametrize("name", [name for name, manifest in STUDIES.items() if manifest.measured_gpu_s is not None])
def test_a_sweep_s_gpu_time_recomputes_from_its_store_and_its_plan_was_within_a_quarter_of_it(name):
    manifest = STUDIES[name]
    store_file = studies.STUDIES / name / manifest.store
    assert studies.measured_gpu_s(store_file) == manifest.measured_gpu_s
    assert manifest.plan_estimate_s is not None
    assert 0.75 <= manifest.plan_estimate_s / manifest.measured_gpu_s <= 1.25
    # compiles ran beside timing, and no timed window shared its GPU
    processes = processes_of(studies.all_cells(store_file))
    assert overlapping_windows(processes) == [] and lifetimes_overlap(processes) > 0


def test_the_readme_opens_with_the_answer_its_study_s_store_gives():
    readme = (REPO / "README.md").read_text()
    assert studies.readme_with_answer(readme) == readme


def test_a_figure_the_store_does_not_give_is_found_out(tmp_path):
    name = "decode-memory-limit"
    manifest = STUDIES[name]
    wrong = manifest.model_copy(update={"figure": manifest.figure.model_copy(update={"value": 0.9})})
    assert studies.recomputed(studies.STUDIES / name, wrong) != wrong.figure


def _quoted_studies() -> set[str]:
    docs = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]
    return {match for doc in docs for match in re.findall(r"benchmarks/studies/([\w-]+)", doc.read_text())}


def test_every_study_the_readme_and_docs_quote_exists():
    quoted = _quoted_studies()
    assert quoted and quoted <= set(STUDIES)


def test_the_benchmarks_index_is_written_from_the_manifests():
    text = (REPO / "benchmarks" / "README.md").read_text()
    assert text == studies.index()
    assert len(text.splitlines()) <= 200


def test_benchmarks_holds_few_files_and_none_named_by_a_date_or_a_commit():
    tracked = subprocess.run(["git", "ls-files", "benchmarks"], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.split()
    assert 0 < len(tracked) <= 72
    dated = [path for path in tracked if re.search(r"\d{4}-\d{2}-\d{2}|(?<![0-9a-z])[0-9a-f]{7,40}(?![0-9a-z])", path)]
    assert dated == []


def test_the_support_matrix_is_written_from_the_catalog_the_envs_and_the_studies():
    assert (REPO / "docs" / "support.md").read_text() == studies.support_page()


def test_the_support_matrix_names_an_env_whose_container_measured_a_gpu_cell(tmp_path):
    from mlcbench.orchestrator.store import Store

    folder = tmp_path / "crossgen"
    folder.mkdir()
    shutil.copyfile(studies.STUDIES / "crossgen" / "manifest.toml", folder / "manifest.toml")
    (cell, *_) = studies.ok_cells(studies.STUDIES / "crossgen" / STUDIES["crossgen"].store)
    # the container-h200 study measured GPU cells in gpu-host's container (its local side's cells do not count)
    assert "measured a GPU cell in the studies: `gpu-host`." in studies.support_matrix(studies.STUDIES)
    in_container = cell.model_copy(update={"provenance": cell.provenance.model_copy(update={"env": "triton-2602"})})
    Store(f"sqlite:///{folder / STUDIES['crossgen'].store}").put_all([(in_container, "sweep-1")])
    assert "measured a GPU cell in the studies: `triton-2602`." in studies.support_matrix(tmp_path)


def test_every_file_a_runner_script_names_under_benchmarks_exists():
    """The runners the GPU machine's calls use source and call one another by path: one that names a file that left
    the tree (benchmarks/device_env.sh did, with the study reorganisation) fails on the GPU, at the cost of a call."""
    scripts = sorted([*(REPO / "benchmarks").glob("*.sh"), *(REPO / "benchmarks").glob("*.py")])
    named = {(script.name, path) for script in scripts
             for path in re.findall(r"benchmarks/[\w./-]*\w", script.read_text())}
    assert named and [(script, path) for script, path in sorted(named) if not (REPO / path).exists()] == []


def test_the_answer_table_is_written_between_the_readme_s_markers_from_a_study_s_store(tmp_path):
    root = tmp_path / "studies"
    shutil.copytree(studies.STUDIES / "energy-h200", root / studies.ANSWER_STUDY)
    readme = (REPO / "README.md").read_text()
    written = studies.readme_with_answer(readme, root)
    table = studies.answer_table(root / studies.ANSWER_STUDY / "store.db")
    assert "| tinyllama-1.1b | 64 | torch_compile_decode |" in table and "J/token [" in table
    assert table in written and written.count(studies.ANSWER_END) == 1
    assert studies.readme_with_answer(written, root) == written  # written again from the store: the same
