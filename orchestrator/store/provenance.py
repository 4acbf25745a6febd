"""What the host adds to every result before storing it: tags, image, code revision, and derived figures."""

import os
import re
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Optional

from mlcbench.orchestrator.errors import UsageError
from mlcbench.orchestrator.fractions import of_decode_bound, of_peak, peak_tflops
from mlcbench.orchestrator.store.database import ResultRow
from mlcbench.schema import GPUS, Result

REPO = Path(__file__).resolve().parents[2]


# the code revision of a copy that has no .git (copied to a GPU machine, installed from a wheel): pass it in
GIT_REV_VARIABLE = "MLCBENCH_GIT_REV"
# what a revision may hold: a commit, a tag or a describe output ("v1.2-3-gabc-dirty"), no spaces or control characters
_REVISION = re.compile(r"[\w.+/@-]+")


@lru_cache(maxsize=1)
def git_revision() -> Optional[str]:
    """MLCBENCH_GIT_REV when set (a UsageError naming it where it is not a revision the store can hold), else the
    checkout's HEAD (12 hex digits, "-dirty" with uncommitted changes to tracked files); None where neither is
    known."""
    given = os.environ.get(GIT_REV_VARIABLE, "").strip()
    if given:
        limit = ResultRow.__table__.c.git_rev.type.length
        if len(given) > limit or not _REVISION.fullmatch(given):
            raise UsageError(f"{GIT_REV_VARIABLE} {given[:limit]!r}{'...' if len(given) > limit else ''} is not a "
                             f"code revision ({len(given)} characters; expected at most {limit} letters, digits and "
                             f"._+/@-, e.g. the output of git rev-parse --short=12 HEAD): set it to one, or unset it")
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
    revision, the library versions and how its workers started. A process that differs in any of them starts a new
    attempt."""
    provenance = result.provenance
    return {"GPU UUID": provenance.gpu.uuid if provenance.gpu else None, "host": provenance.hostname,
            "code revision": provenance.git_rev, "Python": provenance.python,
            "library versions": sorted(provenance.packages.items()), "start-up": provenance.startup}


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


def _derived(result: Result, gpu_tag: str):
    metrics, job = result.metrics, result.job
    peaks = GPUS.get(gpu_tag)
    if peaks is None or job.device != "cuda":
        return metrics
    update = {}
    peak = of_peak(metrics.tflops, peak_tflops(gpu_tag, job.precision, metrics.accumulation))
    if peak is not None:
        update["peak_fraction"] = peak
    # a decode step reads every weight and the KV cache once: bytes per step over the bandwidth
    bandwidth = of_decode_bound(job, metrics.tpot_ms, peaks.bandwidth_gbs)
    if bandwidth is not None:
        update["bandwidth_fraction"] = bandwidth
    return metrics.model_copy(update=update)
