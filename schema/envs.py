from typing import Literal, Optional

from pydantic import Field, field_validator

from mlcbench.schema.base import StrictModel, invalid
from mlcbench.schema.catalog import WORKFLOWS


class RunOptions(StrictModel):
    shm_size: Optional[str] = None
    ipc_host: bool = False
    ulimits: dict[str, int] = {}
    env: dict[str, str] = {}
    # limits of each worker container: processes and threads (compilers start many), memory in Docker's syntax
    # ("32g"; None: the host's)
    pids_limit: int = Field(8192, ge=64)
    memory: Optional[str] = Field(None, pattern=r"^[0-9]+[bkmg]?$")


class BuildProfile(StrictModel):
    """Another build of an env's one Dockerfile (env.toml `[profiles.NAME]`), e.g. a CPU build of a GPU stack."""

    description: str
    base_image: Optional[str] = None
    build_args: dict[str, str] = {}


class EnvSpec(StrictModel):
    """One toolchain stack, as declared by `envs/<name>/env.toml`."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")
    description: str = ""
    runtime: Literal["docker", "local"]
    base_image: Optional[str] = None
    build_args: dict[str, str] = {}
    # a folder of envs/ without an env.toml whose Dockerfile (and the files it copies) this env builds with its own
    # build_args, so that stacks differing only in pins share one Dockerfile; the env's own files are laid over it
    build_from: Optional[str] = Field(None, pattern=r"^[a-z0-9][a-z0-9._-]*$")
    python: Optional[str] = None
    cuda: Optional[str] = None
    # compute capabilities the stack can target, e.g. ["8.0", "8.9", "9.0"]; empty: CPU only
    gpu_archs: list[str] = []
    # "*" means: whatever the interpreter can import (the local env)
    workflows: list[str]
    run: RunOptions = RunOptions()
    profiles: dict[str, BuildProfile] = {}

    @field_validator("workflows")
    @classmethod
    def _workflows_of_the_catalog(cls, workflows: list[str]) -> list[str]:
        unknown = [name for name in workflows if name != "*" and name not in WORKFLOWS]
        if unknown:
            raise invalid(f"{', '.join(map(repr, unknown))} not in the catalog's workflows "
                          f"(schema/catalog.py): {', '.join(WORKFLOWS)}")
        return workflows

    def with_profile(self, name: str) -> "EnvSpec":
        """The env as its profile `name` builds it: the profile's base image and build args over the env's own."""
        profile = self.profiles[name]
        return self.model_copy(update={"description": profile.description,
                                       "base_image": profile.base_image or self.base_image,
                                       "build_args": {**self.build_args, **profile.build_args}})

    def provides(self, workflow: str) -> bool:
        return "*" in self.workflows or workflow in self.workflows

    def can_target(self, compute_capability: str) -> bool:
        return compute_capability in self.gpu_archs
