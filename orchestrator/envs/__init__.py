"""Environment discovery: every `envs/<name>/env.toml` is an environment; adding one needs no Python change."""

import hashlib
import os
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Optional

from pydantic import ValidationError

from mlcbench.orchestrator.errors import UsageError
from mlcbench.schema import EnvSpec

ENVS_DIR_VARIABLE = "MLCBENCH_ENVS_DIR"
ENV_FILE = "env.toml"


def envs_dir() -> Path:
    """MLCBENCH_ENVS_DIR, else the envs beside the code: the checkout's envs/, or the copy an installed package
    carries (mlcbench/envs/, pyproject.toml's package data), each two folders above this one."""
    override = os.environ.get(ENVS_DIR_VARIABLE)
    return Path(override) if override else Path(__file__).resolve().parents[2] / "envs"


def env_names() -> list[str]:
    root = envs_dir()
    return sorted(p.parent.name for p in root.glob("*/env.toml")) if root.is_dir() else []


def load_env(name: str, profile: Optional[str] = None) -> EnvSpec:
    """The env of `envs/<name>/env.toml`; with a profile, as that profile of it builds (see EnvSpec.with_profile)."""
    spec = _read_env(name)
    if profile is None:
        return spec
    if profile not in spec.profiles:
        known = ", ".join(spec.profiles) or "none"
        raise UsageError(f"env {name!r} has no build profile {profile!r} (its profiles: {known}); "
                         f"profiles are env.toml's [profiles.NAME] tables")
    return spec.with_profile(profile)


def _read_env(name: str) -> EnvSpec:
    path = envs_dir() / name / ENV_FILE
    if not path.is_file():
        known = ", ".join(env_names()) or "none"
        raise UsageError(f"unknown env {name!r}: no {path} (known envs: {known})")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise UsageError(f"env {name!r}: cannot read {path} ({error})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise UsageError(f"env {name!r}: {path} is not valid TOML ({error}); fix the file") from None
    if "name" in data:
        raise UsageError(f"env {name!r}: {path}: field name: an env is named by its folder; remove the key")
    try:
        spec = EnvSpec.model_validate({"name": name, **data})
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "(file)"
        raise UsageError(f"env {name!r}: {path}: field {field}: {first['msg']}; fix the file") from None
    shared = envs_dir() / spec.build_from if spec.build_from else None
    if shared is not None and (not shared.is_dir() or (shared / "env.toml").is_file()):
        raise UsageError(f"env {name!r}: {path}: field build_from: {shared} is not a folder of build files (one "
                         f"without an env.toml); fix the file")
    return spec


def env_folder(name: str) -> Path:
    return envs_dir() / name


def build_folders(env: EnvSpec) -> list[Path]:
    """The folders whose files make the env's build context, in the order they are laid: the shared build files its
    env.toml names (build_from), then its own folder."""
    return [*([envs_dir() / env.build_from] if env.build_from else []), env_folder(env.name)]


def build_files(env: EnvSpec) -> dict[str, Path]:
    """The build context's files by their path in it (an env's own file takes the place of a shared one). env.toml is
    not one: the host reads it, and what of it reaches a build are the build arguments."""
    files: dict[str, Path] = {}
    for folder in build_folders(env):
        files.update({path.relative_to(folder).as_posix(): path for path in folder.rglob("*") if path.is_file()})
    files.pop(ENV_FILE, None)
    return files


def files_hash(env: EnvSpec) -> str:
    """sha256 over the env's files: its env.toml and its build context's."""
    return hash_files({**build_files(env), ENV_FILE: env_folder(env.name) / ENV_FILE})


def hash_files(files: dict[str, Path]) -> str:
    """sha256 over files by name (name and content), in a stable order."""
    digest = hashlib.sha256()
    for name, path in sorted(files.items()):
        digest.update(name.encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def config_key(env: EnvSpec) -> str:
    """What decides which workflows an env can run, as one hash: the env's files (env.toml, Dockerfile) and, for the
    local env, the packages installed in this interpreter. An `unsupported` result stored under another key is tried
    again (a typo fixed in env.toml, a library installed)."""
    digest = hashlib.sha256(files_hash(env).encode())
    if env.runtime == "local":
        installed = sorted(f"{dist.metadata['Name']}=={dist.version}".lower() for dist in metadata.distributions())
        digest.update("\n".join(installed).encode())
    return digest.hexdigest()[:16]
