"""Docker runtime and image settings that need no engine: container options, image tags, error messages."""

import os
from pathlib import Path

import pytest

from mlcbench.orchestrator.envs import ENVS_DIR_VARIABLE, load_env
from mlcbench.orchestrator.errors import EnvironmentFailure, UsageError
from mlcbench.orchestrator.envs.images import BuildOptions, build_args, connect, image_tag
from mlcbench.orchestrator.runtimes.base import WorkerFiles
from mlcbench.orchestrator.runtimes.docker import CODE_ROOT, checkpoint_folders, container_options, inherited_cpus
from mlcbench.orchestrator.runtimes.gpu_passthrough import ToolkitGpu
from mlcbench.schema import EnvSpec, JobSpec, RunOptions

GPU_UUID = "GPU-12345678-abcd-ef01-2345-6789abcdef01"


def gpu_env() -> EnvSpec:
    return EnvSpec(name="triton-test", runtime="docker", cuda="12.8", gpu_archs=["8.9", "9.0"], workflows=["eager"],
                   run=RunOptions(shm_size="8g", ipc_host=True, ulimits={"memlock": -1, "stack": 67108864},
                                  env={"PJRT_DEVICE": "CUDA"}))


def options_for(env: EnvSpec, tmp_path: Path, **kwargs) -> dict:
    files = WorkerFiles(tmp_path / "work")
    return container_options(env, "mlcbench/triton-test:abc", files, tmp_path / "cache", ToolkitGpu(GPU_UUID), **kwargs)


def test_gpu_worker_is_pinned_by_uuid_with_ngc_settings(tmp_path):
    options = options_for(gpu_env(), tmp_path)
    [request] = options["device_requests"]
    assert request["DeviceIDs"] == [GPU_UUID]
    assert request["Capabilities"] == [["gpu"]]
    assert options["ipc_mode"] == "host"
    assert "shm_size" not in options  # with the host's IPC namespace /dev/shm is the host's
    ulimits = {ulimit["Name"]: (ulimit["Soft"], ulimit["Hard"]) for ulimit in options["ulimits"]}
    assert ulimits == {"memlock": (-1, -1), "stack": (67108864, 67108864)}
    assert options["privileged"] is False
    assert options["detach"] is True
    assert options["init"] is True
    assert options["network_mode"] == "none"
    assert (options["cap_drop"], options["security_opt"], options["read_only"]) == (["ALL"], ["no-new-privileges"],
                                                                                   True)
    assert "tmpfs" not in options  # a worker writes in its exchange and cache folders alone
    assert (options["pids_limit"], "mem_limit" in options) == (8192, False)


def test_process_and_memory_limits_come_from_env_toml(tmp_path, monkeypatch):
    folder = tmp_path / "envs" / "small"
    folder.mkdir(parents=True)
    (folder / "env.toml").write_text('runtime = "docker"\nworkflows = ["eager"]\n[run]\npids_limit = 512\n'
                                     'memory = "6g"\n')
    monkeypatch.setenv(ENVS_DIR_VARIABLE, str(tmp_path / "envs"))
    options = options_for(load_env("small"), tmp_path)
    assert (options["pids_limit"], options["mem_limit"]) == (512, "6g")


def test_code_is_mounted_read_only_and_work_and_cache_read_write(tmp_path):
    options = options_for(gpu_env(), tmp_path)
    volumes = options["volumes"]
    assert volumes[str(CODE_ROOT / "workers")] == {"bind": "/mlcbench/code/mlcbench/workers", "mode": "ro"}
    assert volumes[str(CODE_ROOT / "schema")] == {"bind": "/mlcbench/code/mlcbench/schema", "mode": "ro"}
    assert volumes[str((tmp_path / "work").resolve())] == {"bind": "/mlcbench/work", "mode": "rw"}
    assert volumes[str((tmp_path / "cache").resolve())] == {"bind": "/mlcbench/cache", "mode": "rw"}
    assert not any(str(CODE_ROOT / "orchestrator") in path for path in volumes)
    assert options["command"] == ["python", "-m", "mlcbench.workers", "run", "--jobs", "/mlcbench/work/jobs.jsonl",
                                  "--results", "/mlcbench/work/results.jsonl", "--progress",
                                  "/mlcbench/work/progress.txt", "--cache-dir", "/mlcbench/cache"]


def test_a_checkpoint_folder_is_mounted_read_only_where_the_job_names_it(tmp_path):
    folder = str(tmp_path / "TinyLlama")
    jobs = (JobSpec(model="tinyllama-1.1b", workflow="eager", precision="bf16", batch_size=1, model_path=folder),
            JobSpec(model="ffn-tinyllama", workflow="eager", precision="bf16", batch_size=1))
    files = WorkerFiles(tmp_path / "work")
    files.folder.mkdir(parents=True)
    files.jobs.write_text("".join(job.model_dump_json() + "\n" for job in jobs))
    volumes = options_for(gpu_env(), tmp_path, checkpoints=checkpoint_folders(files))["volumes"]
    assert volumes[folder] == {"bind": folder, "mode": "ro"}
    assert len(volumes) == 5  # the two packages, the checkpoint, work and cache


def test_labels_environment_and_user(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    monkeypatch.setenv("SOME_HOST_VARIABLE", "not passed")
    options = options_for(gpu_env(), tmp_path, extra_env={"MLCBENCH_TEST_FAULTS": "1"},
                          labels={"mlcbench.sweep": "s1"})
    assert options["labels"] == {"mlcbench": "1", "mlcbench.env": "triton-test", "mlcbench.sweep": "s1"}
    environment = options["environment"]
    assert environment["PJRT_DEVICE"] == "CUDA"
    assert environment["PYTHONPATH"] == "/mlcbench/code"
    assert environment["MLCBENCH_TEST_FAULTS"] == "1"
    assert environment["HF_TOKEN"] == "hf_secret"
    assert "SOME_HOST_VARIABLE" not in environment
    uid, gid = options["user"].split(":")
    assert (int(uid), int(gid)) == ((65534, 65534) if os.getuid() == 0 else (os.getuid(), os.getgid()))
    assert uid != "0" and options["privileged"] is False and options["network_mode"] == "none"


def test_cpu_env_gets_no_gpu_and_its_shm_size(tmp_path):
    cpu = EnvSpec(name="cpu-test", runtime="docker", workflows=["eager"], run=RunOptions(shm_size="2g"))
    options = options_for(cpu, tmp_path)
    assert "device_requests" not in options
    assert "ipc_mode" not in options
    assert options["shm_size"] == "2g"
    assert options_for(cpu, tmp_path, network=True)["network_mode"] == "bridge"


def test_a_lanes_container_runs_on_its_share_of_the_hosts_cores(tmp_path):
    cpu = EnvSpec(name="cpu-test", runtime="docker", workflows=["eager"])
    assert "cpuset_cpus" not in options_for(cpu, tmp_path)
    assert options_for(cpu, tmp_path, cpus=frozenset({9, 8, 10}))["cpuset_cpus"] == "8,9,10"


def test_a_sweep_held_to_some_cores_holds_its_containers_to_them(monkeypatch):
    """A local worker inherits the cores its sweep was held to (taskset); a container must be given them."""
    monkeypatch.setattr(os, "cpu_count", lambda: 32)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16, 32)))
    assert inherited_cpus() == frozenset(range(16, 32))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(32)))
    assert inherited_cpus() is None


def test_image_tag_is_stable_and_follows_files_and_build_settings(envs_copy, tmp_path):
    env = load_env("cpu")
    tag = image_tag(env)
    assert tag.startswith("mlcbench/cpu:")
    assert image_tag(load_env("cpu")) == tag
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    assert image_tag(env, BuildOptions(wheelhouse=wheels)) == tag  # the wheelhouse only carries pinned packages

    tags = {tag,
            image_tag(env, BuildOptions(base_image="mirror.example/debian:bookworm-slim")),
            image_tag(env, BuildOptions(index_url="https://pypi.example/simple"))}
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
    tags.add(image_tag(env, BuildOptions(ca_bundle=ca)))
    ca.write_text("-----BEGIN CERTIFICATE-----\nBBBB\n-----END CERTIFICATE-----\n")
    tags.add(image_tag(env, BuildOptions(ca_bundle=ca)))
    with open(envs_copy / "cpu" / "Dockerfile", "a") as dockerfile:
        dockerfile.write("# a change\n")
    tags.add(image_tag(env))
    assert len(tags) == 6


def test_base_image_override_becomes_a_build_arg(envs_copy):
    env = load_env("cpu")
    assert build_args(env, BuildOptions())["BASE_IMAGE"] == env.base_image
    args = build_args(env, BuildOptions(base_image="mlcbench-base/debian:bookworm", index_url="https://pypi.example"))
    assert args["BASE_IMAGE"] == "mlcbench-base/debian:bookworm"
    assert args["PIP_INDEX_URL"] == "https://pypi.example"


def test_a_build_profile_puts_its_base_image_and_build_args_over_the_envs(envs_copy):
    toml = envs_copy / "cpu" / "env.toml"
    toml.write_text('build_args = { TORCH_INDEX_URL = "https://mirror.example/cpu", KEEP = "1" }\n'
                    + toml.read_text()
                    + '[profiles.slim]\ndescription = "another base"\nbase_image = "mlcbench-base/debian:bookworm"\n'
                      'build_args = { TORCH_INDEX_URL = "" }\n')
    env, slim = load_env("cpu"), load_env("cpu", "slim")
    assert build_args(slim, BuildOptions()) == {"TORCH_INDEX_URL": "", "KEEP": "1",
                                                "BASE_IMAGE": "mlcbench-base/debian:bookworm"}
    assert slim.name == env.name and slim.description == "another base"  # its results are the env's
    assert image_tag(slim) != image_tag(env) and image_tag(slim).startswith("mlcbench/cpu:")
    with pytest.raises(UsageError, match=r"env 'cpu' has no build profile 'gpu' \(its profiles: slim\)"):
        load_env("cpu", "gpu")


def test_the_openxla_cpu_profile_builds_without_the_cuda_plugin_for_the_cpu():
    args = build_args(load_env("openxla", "cpu"), BuildOptions())
    assert (args["TORCH_INDEX_URL"], args["TORCH_XLA_CUDA_PLUGIN"], args["PJRT_DEVICE"]) == ("", "", "CPU")
    assert "PJRT_DEVICE" not in load_env("openxla").run.env  # the image says which device: run options are shared


def test_unknown_env_is_a_usage_error(envs_copy):
    with pytest.raises(UsageError, match=r"unknown env 'nope'.*known envs: cpu"):
        load_env("nope")


def test_malformed_env_toml_is_a_usage_error(envs_copy):
    (envs_copy / "cpu" / "env.toml").write_text("runtime = \n")
    with pytest.raises(UsageError, match=r"env 'cpu'.*not valid TOML"):
        load_env("cpu")
    (envs_copy / "cpu" / "env.toml").write_text('runtime = "podman"\nworkflows = []\n')
    with pytest.raises(UsageError, match=r"env 'cpu'.*field runtime"):
        load_env("cpu")


def test_missing_ca_bundle_is_a_usage_error(envs_copy, tmp_path):
    with pytest.raises(UsageError, match=r"env 'cpu': cannot read CA bundle"):
        image_tag(load_env("cpu"), BuildOptions(ca_bundle=tmp_path / "missing.pem"))


def test_engine_not_running_is_an_environment_failure(tmp_path):
    with pytest.raises(EnvironmentFailure, match=r"no Docker engine answers .*start it"):
        connect(f"unix://{tmp_path}/no-such-docker.sock")
