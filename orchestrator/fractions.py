"""A figure as a fraction of a bound, computed here only: of a GPU's peak TFLOPS (synthetic models) and of the decode
bandwidth bound (LLMs: the bytes one decode step must read, over the time a step took, against a bandwidth). The
store derives the fractions it keeps with these, the reports theirs."""

from typing import Optional

from mlcbench.schema import GPUS, JobSpec


def decode_step_bytes(job: JobSpec) -> Optional[int]:
    """Bytes a decode step of this job reads at least, at the mean context length of its decode steps; None where
    the model's weights are laid out in a way the catalog does not count (bound unknown)."""
    return job.info.decode_step_bytes(job.precision, job.batch_size, job.input_len + job.output_len // 2)


def peak_tflops(gpu_tag: str, precision: str, accumulation: Optional[str]) -> Optional[float]:
    """The catalog's peak for a dtype and accumulation mode; None for a GPU the catalog lacks."""
    peaks = GPUS.get(gpu_tag)
    return peaks.peak_tflops(precision, accumulation or "fp32") if peaks else None


def of_peak(tflops: Optional[float], peak: Optional[float]) -> Optional[float]:
    """TFLOPS over a peak (the catalog's, or a matmul measured on the GPU)."""
    return tflops / peak if tflops is not None and peak else None


def read_time_ms(step_bytes: int, bandwidth_gbs: float) -> float:
    """How long reading a decode step's bytes takes at a bandwidth: the step's bound."""
    return step_bytes / (bandwidth_gbs * 1e9) * 1e3


def of_decode_bound(job: JobSpec, step_ms: Optional[float], bandwidth_gbs: Optional[float]) -> Optional[float]:
    """The bytes a decode step reads per step time, against a bandwidth (the spec's, or a copy measured on the GPU);
    None without a step time, a bandwidth or a layout the catalog counts."""
    if not step_ms or not bandwidth_gbs:
        return None
    step_bytes = decode_step_bytes(job)
    return read_time_ms(step_bytes, bandwidth_gbs) / step_ms if step_bytes is not None else None
