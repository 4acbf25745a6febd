"""Which Runtime class runs an env: the one place that maps env.toml's `runtime` kind to its class, for the sweep
(which starts one per GPU) and for Slurm's submission (which asks the class how jobs are shared out, on a login node
that need not be able to start it). Each class is imported when asked: a local sweep needs no Docker client."""

from pathlib import Path

from mlcbench.orchestrator.runtimes.base import Lane, Runtime
from mlcbench.schema import EnvSpec


def runtime_class(env: EnvSpec) -> type[Runtime]:
    if env.runtime == "local":
        from mlcbench.orchestrator.runtimes.local import LocalRuntime

        return LocalRuntime
    from mlcbench.orchestrator.runtimes.docker import DockerRuntime

    return DockerRuntime


def start_runtime(env: EnvSpec, cache_dir: Path, sweep_id: str, lane: Lane) -> Runtime:
    """The env's runtime for one lane (GPU) of a sweep; cache_dir: the env's compile cache."""
    return runtime_class(env).for_sweep(env, cache_dir, sweep_id, lane)
