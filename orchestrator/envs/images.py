"""Env images: one Docker image per env, tagged by a hash of what goes into it, built only when that hash is new."""

import hashlib
import json
import shutil
import tempfile
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import docker
import docker.errors
from rich.console import Console

from mlcbench.orchestrator.envs import build_files, build_folders, hash_files
from mlcbench.orchestrator.errors import EnvironmentFailure, UsageError
from mlcbench.schema import EnvSpec

IMAGE_REPOSITORY = "mlcbench"
# Added to every build context beside the env's files; the Dockerfiles COPY from it.
BUILD_DIR = "mlcbench-build"
LOG_TAIL_LINES = 30
ENV_LABEL = "mlcbench.env"
FILES_LABEL = "mlcbench.files"


@dataclass(frozen=True)
class BuildOptions:
    """How to build, beyond the env's own files: for mirrors, private indexes, TLS-intercepting proxies, offline hosts."""

    base_image: Optional[str] = None
    index_url: Optional[str] = None
    ca_bundle: Optional[Path] = None
    # wheels installed offline; not part of the hash: the env's pins decide what gets installed, this only carries it
    wheelhouse: Optional[Path] = None


@dataclass(frozen=True)
class EnvImage:
    env: str
    tag: str
    # the image id (sha256:...), recorded with every result for provenance
    digest: str
    # False when an image with this tag already existed
    built: bool


def connect(base_url: Optional[str] = None) -> docker.DockerClient:
    """A client of the local engine (DOCKER_HOST, else the default socket), or an EnvironmentFailure saying how to
    start one."""
    try:
        client = docker.DockerClient(base_url=base_url) if base_url else docker.from_env()
        client.ping()
    except docker.errors.DockerException as error:
        raise EnvironmentFailure(f"no Docker engine answers ({_first_line(error)}); start it (e.g. `sudo systemctl "
                                 f"start docker`, or .ci/docker-setup.sh), or use the local env (--env local)") \
            from None
    return client


def build_args(env: EnvSpec, options: BuildOptions) -> dict[str, str]:
    """The Dockerfile ARGs of a build: the env's own, then the base image and index from the env or the options."""
    args = dict(env.build_args)
    base_image = options.base_image or env.base_image
    if base_image:
        args["BASE_IMAGE"] = base_image
    if options.index_url:
        args["PIP_INDEX_URL"] = options.index_url
    return args


def content_hash(env: EnvSpec) -> str:
    """What the env's image is built from, whatever the build options: the build context's files and the env's own
    build arguments. The rest of env.toml (its workflows, say) changes no image and so no tag."""
    content = json.dumps({"files": hash_files(build_files(env)), "args": build_args(env, BuildOptions())},
                         sort_keys=True)
    return hashlib.sha256(content.encode()).hexdigest()


def image_tag(env: EnvSpec, options: BuildOptions = BuildOptions()) -> str:
    """mlcbench/<env>:<hash of what the image is built from and the effective build settings>."""
    ca_bundle = _read_ca_bundle(env, options.ca_bundle)
    settings = json.dumps({"content": content_hash(env), "args": build_args(env, options),
                           "ca_bundle": hashlib.sha256(ca_bundle).hexdigest()}, sort_keys=True)
    return f"{IMAGE_REPOSITORY}/{env.name}:{hashlib.sha256(settings.encode()).hexdigest()[:16]}"


def find_image(client: docker.DockerClient, env: EnvSpec, options: Optional[BuildOptions] = None) -> Optional[EnvImage]:
    """The image of these exact build settings; with options None, the newest image built from the env's current
    content (content_hash) with any settings (so a sweep reuses what `mlcbench build --base-image ...` made)."""
    files = hash_files(build_files(env))
    if options is not None:
        tag = image_tag(env, options)
        try:
            image = client.images.get(tag)
        except docker.errors.ImageNotFound:
            return None
        # an image of this tag built by an older mlcbench lacks the label a sweep finds it by: built again, it has it
        if (image.labels or {}).get(FILES_LABEL) != files:
            return None
        return EnvImage(env.name, tag, image.id, built=False)
    labels = [f"{ENV_LABEL}={env.name}", f"{FILES_LABEL}={files}"]
    images = sorted(client.images.list(filters={"label": labels}), key=lambda image: image.attrs["Created"])
    for image in reversed(images):
        tags = [tag for tag in image.tags if tag.startswith(f"{IMAGE_REPOSITORY}/{env.name}:")]
        if tags:
            return EnvImage(env.name, tags[0], image.id, built=False)
    return None


def ensure_image(client: docker.DockerClient, env: EnvSpec, options: Optional[BuildOptions] = None,
                 console: Optional[Console] = None) -> EnvImage:
    """The env's image, built first when no image matches (see find_image; options None builds with the defaults)."""
    return find_image(client, env, options) or build_image(client, env, options or BuildOptions(), console)


def build_image(client: docker.DockerClient, env: EnvSpec, options: BuildOptions = BuildOptions(),
                console: Optional[Console] = None) -> EnvImage:
    """Build unconditionally, streaming the log behind a status line; a failed build raises with the log's tail."""
    if env.runtime != "docker":
        raise UsageError(f"env {env.name!r} has runtime {env.runtime!r}: there is no image to build")
    if "Dockerfile" not in build_files(env):
        raise UsageError(f"env {env.name!r}: no Dockerfile in {' or '.join(map(str, build_folders(env)))}; add one "
                         f"(every docker env needs a Dockerfile)")
    if options.wheelhouse is not None and not options.wheelhouse.is_dir():
        raise UsageError(f"env {env.name!r}: wheelhouse {options.wheelhouse} is not a folder")
    tag = image_tag(env, options)
    console = console or Console(stderr=True)
    tail: deque[str] = deque(maxlen=LOG_TAIL_LINES)
    labels = {"mlcbench": "1", ENV_LABEL: env.name, FILES_LABEL: hash_files(build_files(env))}
    with tempfile.TemporaryDirectory(prefix=f"mlcbench-build-{env.name}-") as context:
        _assemble_context(env, options, Path(context))
        with console.status(f"building {tag}") as status:
            try:
                stream = client.api.build(path=context, tag=tag, buildargs=build_args(env, options), labels=labels,
                                          rm=True, forcerm=True, decode=True)
                for chunk in stream:
                    if "error" in chunk:
                        tail.append(chunk["error"].rstrip())
                        raise _build_failed(env, tag, tail)
                    for line in chunk.get("stream", "").splitlines():
                        if line.strip():
                            tail.append(line)
                            if line.startswith("Step "):
                                status.update(f"building {tag}: {line}")
                                if not console.is_terminal:  # CI logs: the status line is not drawn there
                                    console.print(line, highlight=False, markup=False)
            except docker.errors.APIError as error:
                tail.append(_first_line(error))
                raise _build_failed(env, tag, tail) from None
    try:
        image = client.images.get(tag)
    except docker.errors.ImageNotFound:
        raise _build_failed(env, tag, tail) from None
    return EnvImage(env.name, tag, image.id, built=True)


def _assemble_context(env: EnvSpec, options: BuildOptions, context: Path) -> None:
    for name, path in build_files(env).items():
        (context / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, context / name)
    extras = context / BUILD_DIR
    (extras / "wheelhouse").mkdir(parents=True)
    (extras / "ca.pem").write_bytes(_read_ca_bundle(env, options.ca_bundle))
    if options.wheelhouse is not None:
        for wheel in options.wheelhouse.glob("*.whl"):
            shutil.copy2(wheel, extras / "wheelhouse" / wheel.name)


def _read_ca_bundle(env: EnvSpec, path: Optional[Path]) -> bytes:
    if path is None:
        return b""
    try:
        return path.read_bytes()
    except OSError as error:
        raise UsageError(f"env {env.name!r}: cannot read CA bundle {path}: {error.strerror}") from None


def _build_failed(env: EnvSpec, tag: str, tail: deque[str]) -> UsageError:
    log = "\n".join(tail)
    return UsageError(f"env {env.name!r}: building {tag} failed; fix {build_files(env)['Dockerfile']}, the env's "
                      f"build_args or the build settings (--base-image, --index-url, --ca-bundle, --wheelhouse). "
                      f"Last log lines:\n{log}")


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
