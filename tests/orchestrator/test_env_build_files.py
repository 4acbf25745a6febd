"""Stacks that differ only in pins share one Dockerfile: an env's env.toml names a folder of build files
(build_from) and gives its pins as build arguments; its image is tagged by everything that goes into its build."""

import re
from pathlib import Path

import pytest

from mlcbench.orchestrator.envs import build_files, config_key, env_names, load_env
from mlcbench.orchestrator.envs.images import BuildOptions, _assemble_context, build_args, content_hash, image_tag
from mlcbench.orchestrator.errors import UsageError

ENVS = Path(__file__).resolve().parents[2] / "envs"
TRITON = ("triton-2504", "triton-2602")
# arguments a build may leave unset: pip's own index settings
OPTIONAL_ARGS = {"PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL"}


def _args_without_default(dockerfile: Path) -> set[str]:
    return set(re.findall(r"^ARG (\w+)\s*$", dockerfile.read_text(), flags=re.M))


@pytest.mark.parametrize("env", [name for name in env_names() if load_env(name).runtime == "docker"])
def test_every_build_argument_a_dockerfile_needs_is_given_by_the_envs_build_args(env):
    spec = load_env(env)
    needed = _args_without_default(build_files(spec)["Dockerfile"]) - OPTIONAL_ARGS
    assert needed <= set(build_args(spec, BuildOptions())), env


def test_the_triton_envs_build_one_dockerfile_with_their_own_pins():
    specs = [load_env(name) for name in TRITON]
    assert {build_files(spec)["Dockerfile"] for spec in specs} == {ENVS / "triton" / "Dockerfile"}
    pins = [build_args(spec, BuildOptions()) for spec in specs]
    assert pins[0]["TORCH_TENSORRT_PACKAGES"] != pins[1]["TORCH_TENSORRT_PACKAGES"]
    assert "onnxruntime-gpu==1.22.0" in pins[0]["ORT_PACKAGES"] and "torch==2.9.0" in pins[1]["TORCH_TENSORRT_PACKAGES"]
    assert not (ENVS / "triton" / "env.toml").exists() and "triton" not in env_names()


def test_the_build_context_holds_the_shared_files_and_the_envs_own_over_them(envs_copy, tmp_path):
    (envs_copy / "triton-2504" / "python-shim.sh").write_text("#!/bin/sh\nexec /usr/bin/python3 \"$@\"\n")
    context = tmp_path / "context"
    _assemble_context(load_env("triton-2504"), BuildOptions(), context)
    assert (context / "Dockerfile").read_bytes() == (envs_copy / "triton" / "Dockerfile").read_bytes()
    assert (context / "keep-pins.py").is_file() and not (context / "env.toml").exists()  # read by the host only
    assert "/opt/torchtrt" not in (context / "python-shim.sh").read_text()  # the env's own file wins


def test_an_image_tag_follows_the_shared_files_and_each_envs_own_pins(envs_copy):
    def tags() -> dict[str, str]:
        return {name: image_tag(load_env(name)) for name in (*TRITON, "cpu")}

    before = tags()
    with open(envs_copy / "triton" / "Dockerfile", "a") as dockerfile:
        dockerfile.write("# a change\n")
    shared_changed = tags()
    assert [shared_changed[name] != before[name] for name in (*TRITON, "cpu")] == [True, True, False]

    toml = envs_copy / "triton-2602" / "env.toml"
    toml.write_text(toml.read_text().replace("onnxruntime-gpu==1.31.1", "onnxruntime-gpu==1.31.2"))
    pin_changed = tags()
    assert [pin_changed[name] != shared_changed[name] for name in (*TRITON, "cpu")] == [False, True, False]


@pytest.mark.parametrize("folder", ["nowhere", "cpu"])
def test_build_from_must_name_a_folder_of_build_files_not_an_env(envs_copy, folder):
    toml = envs_copy / "triton-2504" / "env.toml"
    toml.write_text(toml.read_text().replace('build_from = "triton"', f'build_from = "{folder}"'))
    with pytest.raises(UsageError, match=f"field build_from: .*{folder} is not a folder of build files"):
        load_env("triton-2504")


def test_offering_a_workflow_rebuilds_no_image_but_a_base_image_does(envs_copy):
    toml = envs_copy / "cpu" / "env.toml"
    before = load_env("cpu")
    tag, content, key = image_tag(before), content_hash(before), config_key(before)
    toml.write_text(toml.read_text().replace('"torchscript",', ""))
    fewer = load_env("cpu")
    assert "torchscript" in before.workflows and "torchscript" not in fewer.workflows
    assert (image_tag(fewer), content_hash(fewer)) == (tag, content)
    assert config_key(fewer) != key  # an unsupported answer is asked again

    toml.write_text(toml.read_text().replace('base_image = "debian:bookworm-slim"', 'base_image = "debian:trixie-slim"'))
    other_base = load_env("cpu")
    assert content_hash(other_base) != content and image_tag(other_base) != tag
    context = envs_copy.parent / "context"
    _assemble_context(other_base, BuildOptions(), context)
    assert not (context / "env.toml").exists()


class _Image:
    def __init__(self, tag: str, labels: dict[str, str]):
        self.id, self.tags, self.labels, self.attrs = f"sha256:{len(labels)}", [tag], labels, {"Created": "0"}


class _Images:
    def __init__(self, images: list[_Image]):
        self._images = images

    def get(self, tag: str) -> _Image:
        import docker.errors
        for image in self._images:
            if tag in image.tags:
                return image
        raise docker.errors.ImageNotFound(tag)

    def list(self, filters: dict) -> list[_Image]:
        wanted = dict(label.split("=", 1) for label in filters["label"])
        return [image for image in self._images if wanted.items() <= image.labels.items()]


class _Client:
    def __init__(self, *images: _Image):
        self.images = _Images(list(images))


def test_an_image_of_the_right_tag_without_the_label_a_sweep_finds_it_by_is_built_again():
    from mlcbench.orchestrator.envs import hash_files
    from mlcbench.orchestrator.envs.images import ENV_LABEL, FILES_LABEL, find_image

    env, options = load_env("cpu"), BuildOptions(base_image="local/debian")
    tag = image_tag(env, options)
    stale = _Image(tag, {ENV_LABEL: "cpu", FILES_LABEL: "what an older mlcbench hashed"})
    assert find_image(_Client(stale), env, options) is None
    assert find_image(_Client(stale), env) is None
    current = _Image(tag, {ENV_LABEL: "cpu", FILES_LABEL: hash_files(build_files(env))})
    assert find_image(_Client(current), env, options).tag == tag
    assert find_image(_Client(current), env).tag == tag  # a sweep, naming no build options, finds it
