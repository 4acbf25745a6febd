"""`mlcbench envs` and `mlcbench build ENV`: what each env offers, whether its image is built, and building it."""

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Optional

import docker
import typer
from rich.table import Table

from mlcbench.orchestrator.cli.console import console, exits_cleanly
from mlcbench.orchestrator.envs import ENVS_DIR_VARIABLE, env_names, envs_dir, load_env
from mlcbench.orchestrator.errors import EnvironmentFailure, UsageError
from mlcbench.orchestrator.envs.images import BuildOptions, build_image, connect, find_image
from mlcbench.schema import EnvSpec


COMPUTE_CAPABILITY = re.compile(r"\d{1,2}\.\d")


@dataclass(frozen=True)
class EnvRow:
    name: str
    runtime: str
    image: str
    compatible: str
    workflows: str


def env_rows(compute_capability: Optional[str],
             client: Optional[docker.DockerClient]) -> tuple[list[EnvRow], list[str]]:
    """One row per env that reads, and why each other one does not; client None means no engine answers.
    compute_capability None means no GPU here."""
    rows, broken = [], []
    for name in env_names():
        try:
            env = load_env(name)
        except UsageError as error:
            rows.append(EnvRow(name, "?", "-", "-", "broken: see below"))
            broken.append(str(error))
            continue
        rows.append(EnvRow(env.name, env.runtime, _image_cell(env, client), _compatibility(env, compute_capability),
                           ", ".join(env.workflows)))
    return rows, broken


def _image_cell(env: EnvSpec, client: Optional[docker.DockerClient]) -> str:
    if env.runtime != "docker":
        return "-"
    if client is None:
        return "unknown (no Docker engine)"
    image = find_image(client, env)
    return f"{image.tag} ({image.digest[:19]})" if image else "not built"


def _compatibility(env: EnvSpec, compute_capability: Optional[str]) -> str:
    if env.runtime == "local" or compute_capability is None:
        return "yes" if not env.gpu_archs or env.runtime == "local" else "no GPU here"
    if not env.gpu_archs:
        return "yes (CPU only)"
    if env.can_target(compute_capability):
        return f"yes (sm {compute_capability})"
    return f"no: CUDA {env.cuda or '?'} stack targets {', '.join(env.gpu_archs)}, not {compute_capability}"


def _detected_compute_capability() -> Optional[str]:
    from mlcbench.orchestrator.gpu import detect

    gpus = detect()
    return gpus[0].compute_capability if gpus else None


def _client_or_none() -> Optional[docker.DockerClient]:
    try:
        return connect()
    except EnvironmentFailure:
        return None


@exits_cleanly
def envs(
    compute_capability: Annotated[Optional[str], typer.Option(
        help="check compatibility with this compute capability (e.g. 8.9) instead of the detected GPU's")] = None,
) -> None:
    """List the envs: runtime, image built?, compatible with this GPU? An env whose env.toml does not read is listed
    as broken, with why, and the command exits 2."""
    if compute_capability is not None and not COMPUTE_CAPABILITY.fullmatch(compute_capability):
        raise UsageError(f"--compute-capability {compute_capability!r}: expected MAJOR.MINOR, e.g. 8.9 or 12.0")
    if not env_names():
        raise UsageError(f"no envs in {envs_dir()}: each env is a folder there with an env.toml"
                         + (f" ({ENVS_DIR_VARIABLE} is set; unset it for the built-in envs)"
                            if os.environ.get(ENVS_DIR_VARIABLE) else ""))
    rows, broken = env_rows(compute_capability or _detected_compute_capability(), _client_or_none())
    table = Table(title="envs")
    for column in ("env", "runtime", "image", "this GPU", "workflows"):
        table.add_column(column)
    for row in rows:
        table.add_row(row.name, row.runtime, row.image, row.compatible, row.workflows)
    console.print(table)
    if broken:
        raise UsageError("; ".join(broken))


@exits_cleanly
def build(
    env: Annotated[str, typer.Argument(help="env name (a folder of envs/)")],
    profile: Annotated[Optional[str], typer.Option(
        help="another build of the env's Dockerfile, from env.toml's [profiles.NAME] (e.g. openxla's cpu)")] = None,
    base_image: Annotated[Optional[str], typer.Option(help="base image instead of the env's (a mirror, a local image)")] = None,
    index_url: Annotated[Optional[str], typer.Option(help="private Python package index (PIP_INDEX_URL)")] = None,
    ca_bundle: Annotated[Optional[Path], typer.Option(help="extra CA certificates (PEM) to trust while building")] = None,
    wheelhouse: Annotated[Optional[Path], typer.Option(help="folder of wheels to install offline")] = None,
    force: Annotated[bool, typer.Option(help="build even if an image with this hash exists")] = False,
) -> None:
    """Build an env's image (only if its files or build settings changed)."""
    spec = load_env(env, profile)
    if spec.runtime != "docker":
        raise UsageError(f"env {env!r} has runtime {spec.runtime!r}: there is no image to build")
    options = BuildOptions(base_image=base_image, index_url=index_url, ca_bundle=ca_bundle, wheelhouse=wheelhouse)
    client = connect()
    image = None if force else find_image(client, spec, options)
    if image is None:
        image = build_image(client, spec, options)
    console.print(f"{image.tag} {image.digest} ({'built' if image.built else 'up to date, not rebuilt'})")


def register(app: typer.Typer) -> None:
    app.command()(envs)
    app.command()(build)
