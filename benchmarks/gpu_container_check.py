"""Issue 50, step 4: one worker container per GPU of this host, all at once, each started with the arguments a sweep
gives the env's workers (the toolkit's DeviceRequest or the toolkit-free passthrough, the same lock-down) and a probe
instead of the worker: which GPUs CUDA and NVML see inside, which /dev/nvidia* nodes exist, as which user. Each probe
runs twice: as a worker runs (the passthrough sets CUDA_VISIBLE_DEVICES to the GPU) and without that variable, where
only the device nodes fence the GPU. Passes when every container sees exactly one GPU, its own UUID.

    python3 benchmarks/gpu_container_check.py gpu-host OUT.json   (exit 0: passed, 1: failed)
"""

import json
import sys
import tempfile
from pathlib import Path

import docker.errors

from mlcbench.orchestrator.envs import load_env
from mlcbench.orchestrator.envs.images import connect, find_image
from mlcbench.orchestrator.gpu import detect
from mlcbench.orchestrator.runtimes.base import WorkerFiles
from mlcbench.orchestrator.runtimes.docker import container_options, gpu_access, hand_to_worker

PROBE = """
import json, os
seen = {"uid": os.getuid(), "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "dev": sorted(name for name in os.listdir("/dev") if name.startswith("nvidia"))}
import torch
seen["cuda_uuids"] = ["GPU-" + str(torch.cuda.get_device_properties(i).uuid) for i in range(torch.cuda.device_count())]
seen["cuda_sum"] = float((torch.ones(1024, device="cuda") * 2).sum()) if seen["cuda_uuids"] else None
seen["nvml"] = []
try:
    import pynvml
    pynvml.nvmlInit()
    for index in range(pynvml.nvmlDeviceGetCount()):
        try:
            seen["nvml"].append(pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(index)))
        except pynvml.NVMLError as error:
            seen["nvml"].append(f"unreachable: {error}")
except Exception as error:
    seen["nvml_error"] = repr(error)
print(json.dumps(seen))
"""


def main(env_name: str, out: Path) -> int:
    client = connect()
    env = load_env(env_name)
    image = find_image(client, env)
    if image is None:
        print(f"no image of env {env_name} is built: `mlcbench build {env_name} ...` first")
        return 1
    gpus = detect()
    print(f"{len(gpus)} GPU(s): {', '.join(gpu.uuid for gpu in gpus)}; image {image.tag} {image.digest}")
    runs = []
    with tempfile.TemporaryDirectory(prefix="gpu-container-check-") as scratch:
        cache = Path(scratch) / "cache"
        cache.mkdir()
        hand_to_worker(cache)
        for gpu in gpus:
            access = gpu_access(client, image, gpu.uuid)
            for fenced_by_variable in (True, False):
                files = WorkerFiles(Path(scratch) / f"{gpu.uuid}-{fenced_by_variable}")
                files.folder.mkdir()
                hand_to_worker(files.folder)
                options = container_options(env, image.tag, files, cache, access,
                                            labels={"mlcbench.check": "gpu-container"})
                options["command"] = ["python", "-c", PROBE]
                if not fenced_by_variable:
                    options["environment"].pop("CUDA_VISIBLE_DEVICES", None)
                run = {"uuid": gpu.uuid, "access": type(access).__name__,
                       "cuda_visible_devices_set": fenced_by_variable, "devices": options.get("devices", [])}
                try:
                    run["container"] = client.containers.run(**options)
                except docker.errors.APIError as error:
                    run["start_error"] = str(error.explanation or error)
                runs.append(run)
        for run in runs:
            container = run.pop("container", None)
            if container is None:
                run["exit_code"], log = None, run["start_error"]
            else:
                run["exit_code"] = container.wait(timeout=300)["StatusCode"]
                log = container.logs().decode("utf-8", "replace").strip()
                container.remove(force=True)
            try:
                run["seen"] = json.loads(log.splitlines()[-1])
            except (json.JSONDecodeError, IndexError):
                run["seen"], run["log_tail"] = None, log[-2000:]
            seen = run["seen"] or {}
            reachable = [uuid for uuid in seen.get("nvml", []) if not uuid.startswith("unreachable")]
            run["passed"] = run["exit_code"] == 0 and seen.get("cuda_uuids") == [run["uuid"]] \
                and reachable == [run["uuid"]] and seen.get("cuda_sum") == 2048.0 and seen.get("uid") != 0
            print(f"{'PASS' if run['passed'] else 'FAIL'} {run['uuid']} ({run['access']}, CUDA_VISIBLE_DEVICES "
                  f"{'set' if run['cuda_visible_devices_set'] else 'unset'}): exit {run['exit_code']}, "
                  f"sees {json.dumps(seen) if seen else run.get('log_tail')}")
    out.write_text(json.dumps({"image": image.tag, "digest": image.digest, "runs": runs}, indent=2) + "\n")
    return 0 if runs and all(run["passed"] for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], Path(sys.argv[2])))
