"""What the host adds to every result before storing it: tags, image, code revision, and derived figures."""

import os
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Optional

from mlcbench.schema import GPUS, JobSpec, Result

REPO = Path(__file__).resolve().parents[2]


# the code revision of a copy that has no .git (copied to a GPU machine, installed from a wheel): pass it in
GIT_REV_VARIABLE = "MLCBENCH_GIT_REV"


@lru_cache(maxsize=1)
def git_revision() -> Optional[str]:
    """MLCBENCH_GIT_REV when set, else the checkout's HEAD (12 hex digits, "-dirty" with uncommitted changes to
    tracked files); None where neither is known."""
    given = os.environ.get(GIT_REV_VARIABLE, "").strip()
    if given:
        return given
    try:
        rev = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO, capture_output=True, text=True,
                             timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (subprocess.SubprocessError, OSError):
        return None
    return f"{rev}-dirty" if dirty else rev


def setup(result: Result) -> dict[str, object]:
    """What the processes of one attempt at a cell share (one program, measured one way): the GPU, the host, the code
    revision and the library versions. A process that differs in any of them starts a new attempt."""
    provenance = result.provenance
    return {"GPU UUID": provenance.gpu.uuid if provenance.gpu else None, "host": provenance.hostname,
            "code revision": provenance.git_rev, "Python": provenance.python,
            "library versions": sorted(provenance.packages.items())}


def setup_change(before: Result, after: Result) -> Optional[str]:
    """What differs between two results' setups, in words ("GPU UUID GPU-a -> GPU-b"); None when nothing does."""
    old, new = setup(before), setup(after)
    changed = [f"{name} {old[name]} -> {new[name]}" for name in old if old[name] != new[name]]
    return "; ".join(changed) or None


def finish(result: Result, env: str, gpu_tag: str, image_digest: Optional[str], config_key: Optional[str],
           sweep_id: Optional[str] = None) -> Result:
    """Tag a worker's result and add the figures that need the GPU catalog; a result that already names its code
    revision (a sweep's processes are stamped as they arrive) keeps it."""
    provenance = result.provenance.model_copy(update={
        "env": env, "gpu_tag": gpu_tag, "image_digest": image_digest,
        "git_rev": result.provenance.git_rev or git_revision(),
        "config_key": config_key, "sweep_id": sweep_id})
    return result.model_copy(update={"provenance": provenance, "metrics": _derived(result, gpu_tag)})


def decode_step_bytes(job: JobSpec) -> Optional[int]:
    """Bytes a decode step of this job reads at least, at the mean context length of its decode steps; None where
    the model's weights are laid out in a way the catalog does not count (bound unknown)."""
    return job.info.decode_step_bytes(job.precision, job.batch_size, job.input_len + job.output_len // 2)


def _derived(result: Result, gpu_tag: str):
    metrics, job = result.metrics, result.job
    peaks = GPUS.get(gpu_tag)
    if peaks is None or job.device != "cuda":
        return metrics
    update = {}
    if metrics.tflops is not None:
        peak = peaks.peak_tflops(job.precision, metrics.accumulation or "fp32")
        if peak:
            update["peak_fraction"] = metrics.tflops / peak
    step_bytes = decode_step_bytes(job) if metrics.tpot_ms else None
    if metrics.tpot_ms and step_bytes is not None:
        # a decode step reads every weight and the KV cache once: bytes per step over the bandwidth
        bytes_per_s = step_bytes / (metrics.tpot_ms * 1e-3)
        update["bandwidth_fraction"] = bytes_per_s / (peaks.bandwidth_gbs * 1e9)
    return metrics.model_copy(update=update)
