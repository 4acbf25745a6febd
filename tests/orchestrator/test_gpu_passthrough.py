"""The GPU passthrough that needs no NVIDIA container toolkit, on a fake host of two GPUs: which device nodes, driver
libraries and variables a worker container gets, chosen by the GPU's UUID, and when the toolkit is used instead."""

from pathlib import Path

import pytest

from mlcbench.orchestrator.errors import EnvironmentFailure
from mlcbench.orchestrator.runtimes import docker as docker_runtime
from mlcbench.orchestrator.runtimes.base import WorkerFiles
from mlcbench.orchestrator.runtimes.docker import container_options, gpu_access
from mlcbench.orchestrator.envs.images import EnvImage
from mlcbench.orchestrator.runtimes.gpu_passthrough import (CONTAINER_DRIVER_LIBS, Passthrough, ToolkitGpu,
                                                            find_passthrough, toolkit_serves_gpus)
from mlcbench.schema import EnvSpec, RunOptions

# the driver numbers GPUs by PCI probe order, not by bus order: the first bus holds minor 1 here
FIRST = "GPU-11111111-aaaa-bbbb-cccc-000000000001"
SECOND = "GPU-22222222-aaaa-bbbb-cccc-000000000002"
BUSES = {FIRST: ("0000:17:00.0", 1), SECOND: ("0000:2a:00.0", 0)}
DRIVER_VERSION = "580.159.04"


class FakeHost:
    """A /dev, a /proc/driver/nvidia/gpus and a driver library folder as the NVIDIA driver lays them out."""

    def __init__(self, root: Path):
        self.dev = root / "dev"
        self.proc_gpus = root / "proc" / "driver" / "nvidia" / "gpus"
        self.driver = root / "usr" / "local" / "nvidia" / "lib64"
        self.system = root / "lib" / "x86_64-linux-gnu"
        self.lib32 = root / "lib" / "i386-linux-gnu"
        for folder in (self.dev, self.driver, self.system, self.lib32):
            folder.mkdir(parents=True)
        for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset", "null"):
            (self.dev / name).touch()
        for uuid, (bus, minor) in BUSES.items():
            (self.proc_gpus / bus).mkdir(parents=True)
            (self.proc_gpus / bus / "information").write_text(
                f"Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 0\nGPU UUID: \t {uuid}\nVideo BIOS: \t 96.00.99.00.01\n"
                f"Bus Type: \t PCIe\nBus Location: \t {bus}\nDevice Minor: \t {minor}\nGPU Excluded:\t No\n")
        for library in ("libcuda.so", "libnvidia-ml.so", "libnvidia-ptxjitcompiler.so", "libnvidia-nvvm.so"):
            (self.driver / f"{library}.{DRIVER_VERSION}").write_text(library)
            (self.driver / f"{library}.1").symlink_to(f"{library}.{DRIVER_VERSION}")
        (self.driver / "libcuda.so").symlink_to("libcuda.so.1")
        (self.driver / f"libnvidia-glcore.so.{DRIVER_VERSION}").touch()  # graphics: not for CUDA
        (self.system / "libc.so.6").touch()
        (self.lib32 / "libcuda.so.1").touch()

    def ldconfig(self) -> str:
        """`ldconfig -p` of this host: a 32-bit copy listed first, then the driver folder before the system one."""
        entries = [("libnvidia-ml.so.1", "libc6", self.lib32), ("libcuda.so.1", "libc6", self.lib32),
                   ("libnvidia-ml.so.1", "libc6,x86-64", self.driver), ("libc.so.6", "libc6,x86-64", self.system),
                   ("libcuda.so.1", "libc6,x86-64", self.driver), ("libcuda.so.1", "libc6,x86-64", self.system),
                   ("libcuda.so", "libc6,x86-64", self.driver)]
        return f"{len(entries)} libs found in cache `/etc/ld.so.cache'\n" + "".join(
            f"\t{name} ({flags}) => {folder / name}\n" for name, flags, folder in entries)

    def passthrough(self, uuid: str, **kwargs) -> Passthrough:
        return find_passthrough(uuid, dev=self.dev, proc_gpus=self.proc_gpus, minor_from_nvml=lambda _: None,
                                ldconfig_output=self.ldconfig(), **kwargs)


@pytest.fixture
def host(tmp_path) -> FakeHost:
    return FakeHost(tmp_path / "host")


def gpu_env() -> EnvSpec:
    return EnvSpec(name="gpu-test", runtime="docker", cuda="13.0", gpu_archs=["9.0"], workflows=["eager"],
                   run=RunOptions(shm_size="8g", env={"SOME_SETTING": "1"}))


def options_with(gpu, tmp_path: Path) -> dict:
    return container_options(gpu_env(), "mlcbench/gpu-test:abc", WorkerFiles(tmp_path / "work"), tmp_path / "cache",
                             gpu)


def test_each_gpu_gets_its_own_node_by_uuid_and_no_other_gpus(host):
    first, second = host.passthrough(FIRST), host.passthrough(SECOND)
    assert first.devices() == [f"{host.dev}/nvidia1:/dev/nvidia1:rwm", f"{host.dev}/nvidiactl:/dev/nvidiactl:rwm",
                               f"{host.dev}/nvidia-uvm:/dev/nvidia-uvm:rwm",
                               f"{host.dev}/nvidia-uvm-tools:/dev/nvidia-uvm-tools:rwm"]
    assert second.devices()[0] == f"{host.dev}/nvidia0:/dev/nvidia0:rwm"
    assert not any("nvidia0" in device for device in first.devices())
    assert not any("nvidia1" in device for device in second.devices())
    assert first.device_requests() == [] and first.environment()["CUDA_VISIBLE_DEVICES"] == FIRST


def test_the_driver_libraries_are_mounted_read_only_by_name_and_nothing_else_of_their_folders(host):
    volumes = host.passthrough(FIRST).volumes()
    mounted = {Path(source).name: mount for source, mount in volumes.items()}
    names = {f"{library}.{suffix}" for library in ("libcuda.so", "libnvidia-ml.so", "libnvidia-ptxjitcompiler.so",
                                                    "libnvidia-nvvm.so") for suffix in ("1", DRIVER_VERSION)}
    assert set(mounted) == names | {"libcuda.so"}  # libcuda.so: Triton links its launchers against it
    assert all(mount == {"bind": f"{CONTAINER_DRIVER_LIBS}/{name}", "mode": "ro"} for name, mount in mounted.items())
    # the 64-bit driver folder, which the loader prefers: not the 32-bit copy, not the system folder's glibc
    assert {Path(source).parent for source in volumes} == {host.driver}


def test_the_driver_folder_goes_before_the_images_own_library_path(host):
    assert host.passthrough(FIRST).environment()["LD_LIBRARY_PATH"] == CONTAINER_DRIVER_LIBS
    kept = host.passthrough(FIRST, image_library_path="/opt/image/lib").environment()["LD_LIBRARY_PATH"]
    assert kept == f"{CONTAINER_DRIVER_LIBS}:/opt/image/lib"


def test_a_worker_with_the_passthrough_is_locked_down_as_one_with_the_toolkit(host, tmp_path):
    passthrough = host.passthrough(FIRST, image_library_path="/opt/image/lib")
    through, toolkit = options_with(passthrough, tmp_path), options_with(ToolkitGpu(FIRST), tmp_path)
    assert through["devices"] == passthrough.devices() and "device_requests" not in through
    assert [request["DeviceIDs"] for request in toolkit["device_requests"]] == [[FIRST]] and "devices" not in toolkit
    assert through["volumes"] == {**toolkit["volumes"], **passthrough.volumes()}
    assert through["environment"] == {**toolkit["environment"], **passthrough.environment()}
    assert through["environment"]["SOME_SETTING"] == "1"
    gpu_keys = {"devices", "device_requests", "volumes", "environment"}
    assert {key: value for key, value in through.items() if key not in gpu_keys} == \
        {key: value for key, value in toolkit.items() if key not in gpu_keys}
    assert through["user"].split(":")[0] != "0" and through["privileged"] is False
    assert (through["network_mode"], through["cap_drop"], through["security_opt"], through["read_only"]) == \
        ("none", ["ALL"], ["no-new-privileges"], True)


def test_an_env_that_targets_no_gpu_gets_no_passthrough(host, tmp_path):
    cpu = EnvSpec(name="cpu-test", runtime="docker", workflows=["eager"])
    options = container_options(cpu, "mlcbench/cpu-test:abc", WorkerFiles(tmp_path / "work"), tmp_path / "cache",
                                host.passthrough(FIRST))
    assert "devices" not in options and "LD_LIBRARY_PATH" not in options["environment"]
    assert not any(CONTAINER_DRIVER_LIBS in mount["bind"] for mount in options["volumes"].values())


def test_the_toolkit_is_used_where_the_engine_has_it():
    assert toolkit_serves_gpus({"Runtimes": {"runc": {}, "nvidia": {"path": "nvidia-container-runtime"}}}, False)
    assert toolkit_serves_gpus({"Runtimes": {"runc": {}}}, hook_on_path=True)
    assert not toolkit_serves_gpus({"Runtimes": {"runc": {}, "io.containerd.runc.v2": {}}}, False)
    assert not toolkit_serves_gpus({}, False)


class FakeImages:
    def get(self, tag):
        return type("Image", (), {"attrs": {"Config": {"Env": ["PATH=/usr/bin", "LD_LIBRARY_PATH=/opt/image/lib"]}}})


class FakeClient:
    def __init__(self, runtimes: dict):
        self.runtimes = runtimes
        self.images = FakeImages()

    def info(self) -> dict:
        return {"Runtimes": self.runtimes}


def test_without_the_toolkit_the_runtime_passes_the_gpu_through_keeping_the_images_library_path(host, monkeypatch):
    monkeypatch.setattr(docker_runtime.shutil, "which", lambda name: None)
    monkeypatch.setattr(docker_runtime, "find_passthrough", host.passthrough)
    image = EnvImage("gpu-test", "mlcbench/gpu-test:abc", "sha256:abc", built=False)
    assert gpu_access(FakeClient({"runc": {}, "nvidia": {}}), image, SECOND) == ToolkitGpu(SECOND)
    passthrough = gpu_access(FakeClient({"runc": {}}), image, SECOND)
    assert passthrough == host.passthrough(SECOND, image_library_path="/opt/image/lib")


def test_a_uuid_this_host_does_not_have_is_a_clear_error(host):
    with pytest.raises(EnvironmentFailure, match=r"no GPU GPU-nope on this host \(neither .*gpus nor NVML"):
        host.passthrough("GPU-nope")


def test_a_gpu_whose_node_is_missing_is_a_clear_error(host):
    (host.dev / "nvidia1").unlink()
    with pytest.raises(EnvironmentFailure, match=rf"GPU passthrough for {FIRST} \(device minor 1\): no .*/nvidia1;"):
        host.passthrough(FIRST)
    (host.dev / "nvidia-uvm").unlink()
    with pytest.raises(EnvironmentFailure, match=r"\(device minor 0\): no .*/nvidia-uvm;"):
        host.passthrough(SECOND)


def test_nvml_gives_the_minor_where_the_drivers_entry_has_no_uuid_yet(host):
    information = host.proc_gpus / BUSES[FIRST][0] / "information"
    information.write_text("".join(line + "\n" for line in information.read_text().splitlines()
                                   if not line.startswith("GPU UUID")))
    passthrough = find_passthrough(FIRST, dev=host.dev, proc_gpus=host.proc_gpus, ldconfig_output=host.ldconfig(),
                                   minor_from_nvml={FIRST: 1}.get)
    assert passthrough.nodes[0] == host.dev / "nvidia1"


def test_a_host_without_the_drivers_libraries_is_a_clear_error(host):
    ldconfig = "".join(line + "\n" for line in host.ldconfig().splitlines() if "libnvidia-ml" not in line)
    with pytest.raises(EnvironmentFailure, match=r"driver's libnvidia-ml.so.1 is not in the loader cache"):
        find_passthrough(FIRST, dev=host.dev, proc_gpus=host.proc_gpus, ldconfig_output=ldconfig)
