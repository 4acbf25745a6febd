"""The cpu env for real: built through mlcbench's own build path, jobs run in containers, crashes and hangs recovered.

Needs a Docker engine and the local base image and wheelhouse that .ci/docker-setup.sh prepares."""

import os

import docker.errors
import pytest

from mlcbench.orchestrator.envs import load_env
from mlcbench.orchestrator.envs.images import ensure_image
from mlcbench.orchestrator.runtimes.base import WorkerFiles
from mlcbench.orchestrator.runtimes.docker import DockerRuntime, remove_leftovers
from mlcbench.orchestrator.runtimes.local import LocalRuntime
from mlcbench.schema import JobSpec
from tests.conftest import results_of

pytestmark = pytest.mark.docker


def job(model: str, workflow: str, **fields) -> JobSpec:
    return JobSpec(model=model, workflow=workflow, precision="fp32", batch_size=1, device="cpu", warmup=1, repeats=3,
                   **fields)


def test_unchanged_env_is_not_rebuilt(client, cpu_image, build_options, monkeypatch):
    def no_build(*args, **kwargs):
        raise AssertionError("rebuilt an unchanged env")

    monkeypatch.setattr(client.api, "build", no_build)
    again = ensure_image(client, load_env("cpu"), build_options)
    assert again.built is False
    assert (again.tag, again.digest) == (cpu_image.tag, cpu_image.digest)
    assert again.digest.startswith("sha256:")
    # a sweep names no build options: it reuses the image built from the env's current files
    assert ensure_image(client, load_env("cpu")).digest == cpu_image.digest


def test_jobs_in_a_container_match_a_local_run(client, cpu_image, tmp_path):
    jobs = [job(model, workflow) for model in ("ffn-small", "matmul-small")
            for workflow in ("eager", "torch_compile", "torchscript", "onnxruntime")]
    env = load_env("cpu")
    runtime = DockerRuntime(env, cache_dir=tmp_path / "cache", sweep_id="test", client=client)
    assert runtime.image_digest() == cpu_image.digest
    in_container = results_of(runtime, jobs, tmp_path / "docker")
    local = results_of(LocalRuntime(load_env("local"), cache_dir=tmp_path / "local-cache"), jobs, tmp_path / "local")

    assert [(r.job_id, r.status) for r in in_container] == [(j.job_id, "ok") for j in jobs], \
        [(r.job.label(), r.status, r.reason, r.error) for r in in_container]
    # eager is the reference; every compiled workflow is checked against it
    assert all(r.correctness is not None and r.correctness.passed for r in in_container if r.job.workflow != "eager")
    assert [(r.job_id, r.status) for r in in_container] == [(r.job_id, r.status) for r in local]
    # the worker ran as this user, or as nobody where this user is root: never as root
    worker_uid = 65534 if os.getuid() == 0 else os.getuid()
    written = [*(tmp_path / "docker").rglob("results.jsonl"), *(tmp_path / "docker").rglob("progress*")]
    assert written and {path.stat().st_uid for path in written} == {worker_uid}


def test_a_crash_and_a_hang_cost_only_their_own_job(client, cpu_image, tmp_path):
    jobs = [job("matmul-small", "fault-kill"), job("matmul-small", "eager"),
            job("matmul-small", "fault-hang", timeout_s=5), job("ffn-small", "eager")]
    runtime = DockerRuntime(load_env("cpu"), cache_dir=tmp_path / "cache", sweep_id="test", client=client,
                            extra_env={"MLCBENCH_TEST_FAULTS": "1"})
    results = results_of(runtime, jobs, tmp_path / "work")

    assert [r.status for r in results] == ["crashed", "ok", "timeout", "ok"], \
        [(r.job.label(), r.status, r.reason) for r in results]
    assert results[0].exit_code == 137 and "SIGKILL" in results[0].reason
    assert [r.job_id for r in results] == [j.job_id for j in jobs]
    assert client.containers.list(all=True, filters={"label": "mlcbench=1"}) == []


def test_leftovers_of_an_interrupted_run_are_removed(client, cpu_image):
    dead_pid = "4194304"  # above any pid_max: no such process
    orphan = client.containers.create(cpu_image.tag, ["true"], labels={"mlcbench": "1", "mlcbench.pid": dead_pid})
    ours = client.containers.create(cpu_image.tag, ["true"], labels={"mlcbench": "1", "mlcbench.pid": str(os.getpid())})
    try:
        assert remove_leftovers(client) == [orphan.name]
        with pytest.raises(docker.errors.NotFound):
            orphan.reload()
        ours.reload()  # a live mlcbench process's container stays
    finally:
        ours.remove(force=True)


def test_a_running_worker_container_is_locked_down(client, cpu_image, tmp_path):
    """Seen from inside a running worker: no capabilities, no privilege gain, a read-only root filesystem (/tmp too)
    with the exchange and cache folders writable, and the env's process and memory limits."""
    cpu = load_env("cpu")
    env = cpu.model_copy(update={"run": cpu.run.model_copy(update={"pids_limit": 300, "memory": "3g"})})
    runtime = DockerRuntime(env, cache_dir=tmp_path / "cache", sweep_id="test", client=client,
                            extra_env={"MLCBENCH_TEST_FAULTS": "1"})
    files = WorkerFiles(tmp_path / "work")
    files.folder.mkdir()
    files.jobs.write_text(job("matmul-small", "fault-hang").model_dump_json() + "\n")
    try:
        worker = runtime.start_worker(files)
        container = worker.container
        container.reload()
        host = container.attrs["HostConfig"]
        assert (host["CapDrop"], host["SecurityOpt"], host["ReadonlyRootfs"]) == (["ALL"], ["no-new-privileges"], True)
        assert (host["PidsLimit"], host["Memory"], host["Privileged"], host["NetworkMode"]) == (300, 3 << 30, False,
                                                                                               "none")

        def shell(command: str) -> tuple[int, str]:
            code, output = container.exec_run(["sh", "-c", command])
            return code, output.decode().strip()

        status = dict(line.split(":\t", 1) for line in shell("cat /proc/1/status")[1].splitlines() if ":\t" in line)
        assert (status["CapEff"], status["CapPrm"], status["NoNewPrivs"]) == ("0" * 16, "0" * 16, "1")
        assert shell("touch /root-fs-write")[0] != 0 and "Read-only file system" in shell("touch /usr/x")[1]
        assert "Read-only file system" in shell("touch /tmp/x")[1]
        for folder in ("/mlcbench/work", "/mlcbench/cache"):
            assert shell(f"touch {folder}/written && echo ok") == (0, "ok"), folder
        code, forked = shell("for i in $(seq 400); do sleep 60 & done 2>&1; echo started")
        assert "fork" in forked.lower()  # the 300th process could not start
    finally:
        runtime.close()
