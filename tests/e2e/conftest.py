"""The Docker engine and the cpu env's image, shared by the tests that run containers (marker docker). They need
the engine, the local base image and the wheelhouse that .ci/docker-setup.sh prepares, and skip without them."""

import os
from pathlib import Path

import docker.errors
import pytest

from mlcbench.orchestrator.envs import load_env
from mlcbench.orchestrator.envs.images import BuildOptions, EnvImage, connect, ensure_image, find_image
from mlcbench.orchestrator.errors import EnvironmentFailure
from tests.conftest import say

# what .ci/docker-setup.sh makes with debootstrap, so that no build pulls a base image
BASE_IMAGE = "mlcbench-base/debian:bookworm"
WHEELHOUSE = Path(os.environ.get("MLCBENCH_WHEELHOUSE", Path.home() / ".cache" / "mlcbench" / "wheelhouse"))


@pytest.fixture(scope="module")
def client():
    """The engine's client; after the module's tests, no container of mlcbench's is left."""
    try:
        client = connect()
    except EnvironmentFailure as error:
        pytest.skip(f"no Docker engine: {error} (.ci/docker-setup.sh starts one)")
    try:
        client.images.get(BASE_IMAGE)
    except docker.errors.ImageNotFound:
        pytest.skip(f"no local base image {BASE_IMAGE} (.ci/docker-setup.sh makes it with debootstrap)")
    yield client
    assert client.containers.list(all=True, filters={"label": "mlcbench=1"}) == [], "containers left behind"


@pytest.fixture(scope="module")
def build_options() -> BuildOptions:
    return BuildOptions(base_image=BASE_IMAGE, wheelhouse=WHEELHOUSE if WHEELHOUSE.is_dir() else None)


@pytest.fixture(scope="module")
def cpu_image(client, build_options, pytestconfig) -> EnvImage:
    """The cpu env's image of its current files, built through mlcbench's own build path where it is not there."""
    env = load_env("cpu")
    if find_image(client, env, build_options) is None:
        say(pytestconfig, "building the cpu env's image for the tests that run containers (minutes, once per change "
                          "of envs/cpu) ...")
    return ensure_image(client, env, build_options)
