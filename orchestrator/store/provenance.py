"""What the host adds to every result before storing it: tags, image, code revision, and derived figures."""

import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Optional

from mlcbench.schema import GPUS, MODELS, JobSpec, Result

REPO = Path(__file__).resolve().parents[2]


@lru_cache(maxsize=1)
def git_revision() -> Optional[str]:
    try:
        rev = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO, capture_output=True, text=True,
                             timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (subprocess.SubprocessError, OSError):
        return None
    return f"{rev}-dirty" if dirty else rev


def finish(result: Result, env: str, gpu_tag: str, image_digest: Optional[str], config_key: Optional[str],
           sweep_id: Optional[str] = None) -> Result:
    """Tag a worker's result and add the figures that need the GPU catalog."""
    provenance = result.provenance.model_copy(update={
        "env": env, "gpu_tag": gpu_tag, "image_digest": image_digest, "git_rev": git_revision(),
        "config_key": config_key, "sweep_id": sweep_id})
    return result.model_copy(update={"provenance": provenance, "metrics": _derived(result, gpu_tag)})


def decode_step_bytes(job: JobSpec) -> int:
    """Bytes a decode step of this job reads at least, at the mean context length of its decode steps."""
    return MODELS[job.model].decode_step_bytes(job.precision, job.batch_size, job.input_len + job.output_len // 2)


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
    if metrics.tpot_ms:
        # a decode step reads every weight and the KV cache once: bytes per step over the bandwidth
        bytes_per_s = decode_step_bytes(job) / (metrics.tpot_ms * 1e-3)
        update["bandwidth_fraction"] = bytes_per_s / (peaks.bandwidth_gbs * 1e9)
    return metrics.model_copy(update=update)
