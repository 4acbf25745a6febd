"""`mlcbench sweep --env openxla` in the openxla env's CPU build: the paper's torch 2.5 + torch_xla 2.5 for real, on
synthetic models and the 2-layer Llama, torch_compile_openxla beside eager, correct against eager.

The image takes minutes to build, so this test does not build it: `make openxla-image` does (.ci/run calls it first).
"""

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mlcbench.orchestrator.cli import app
from mlcbench.orchestrator.envs import load_env
from mlcbench.orchestrator.envs.images import BuildOptions, connect, find_image
from mlcbench.orchestrator.errors import EnvironmentFailure
from mlcbench.orchestrator.store import Store
from tests.e2e.conftest import BASE_IMAGE

pytestmark = [pytest.mark.docker, pytest.mark.openxla_image]

WHEELHOUSE = Path(os.environ.get("MLCBENCH_OPENXLA_WHEELHOUSE",
                                 Path.home() / ".cache" / "mlcbench" / "wheelhouse-openxla"))


def _missing(reason: str) -> None:
    if os.environ.get("CI"):  # .ci/run makes the image: its absence there is a broken CI, not a skip
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def openxla_image():
    try:
        client = connect()
    except EnvironmentFailure as error:
        _missing(f"no Docker engine: {error} (.ci/docker-setup.sh starts one)")
    options = BuildOptions(base_image=BASE_IMAGE, wheelhouse=WHEELHOUSE if WHEELHOUSE.is_dir() else None)
    image = find_image(client, load_env("openxla", "cpu"), options)
    if image is None:
        _missing("no image of the openxla env's cpu profile for its current files: run `make openxla-image`")
    yield image
    mine = {"label": f"mlcbench.pid={os.getpid()}"}  # the sweep runs in this process; others may share the engine
    assert client.containers.list(all=True, filters=mine) == [], "containers left behind"


def test_openxla_jobs_run_on_torch_xla_and_agree_with_eager(openxla_image, tmp_path):
    db = f"sqlite:///{tmp_path / 'results.db'}"
    outcome = CliRunner().invoke(app, [
        "sweep", "--env", "openxla", "--gpu", "cpu", "--suite", "smoke", "--model", "ffn-small,llama-2layer",
        "--workflow", "eager,torch_compile_openxla", "--batch-size", "1", "--db", db,
        "--workdir", str(tmp_path / "work"), "--cache-dir", str(tmp_path / "cache")])
    assert outcome.exit_code == 0, outcome.output

    rows = Store(db).rows(env="openxla")
    assert {(row.model, row.workflow, row.status) for row in rows} == {
        (model, workflow, "ok") for model in ("ffn-small", "llama-2layer")
        for workflow in ("eager", "torch_compile_openxla")}
    assert {row.image_digest for row in rows} == {openxla_image.digest}
    for row in rows:
        if row.workflow == "torch_compile_openxla":
            assert row.correct, row.model
            result = row.result()
            settings = result.metrics.settings
            assert (settings["torch_xla"], settings["PJRT_DEVICE"], result.metrics.applied.backend) == (
                "2.5.0", "CPU", "openxla")
            assert result.provenance.packages["torch"].startswith("2.5.0")
    llm = next(row.result() for row in rows if row.model == "llama-2layer" and row.workflow == "torch_compile_openxla")
    assert llm.metrics.applied.compiled_graphs > 0 and llm.metrics.settings["xla_compiles"] > 0
