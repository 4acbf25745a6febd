"""The GPU's ceilings: what the first worker on each GPU of a sweep measured (a device-to-device copy, a large matmul
per dtype) beside the catalog's spec."""

from dataclasses import dataclass
from typing import Iterable, Optional

from mlcbench.orchestrator.reports import fmt
from mlcbench.orchestrator.reports.table import Column, Section, table_section, text_cells
from mlcbench.schema import GPUS, Calibration


@dataclass(frozen=True)
class CeilingRow:
    """What the sweep measured on a GPU beside the catalog's spec."""

    gpu: str
    env: str
    sweep: str
    copy_gbs: Optional[float]
    spec_gbs: Optional[float]
    gemm: tuple[tuple[str, float, Optional[float]], ...]  # (precision, measured TFLOPS, spec TFLOPS)
    error: Optional[str]
    # NVML's energy counter: its update period, or why it was not measured (None: a calibration stored before it was)
    energy_counter: Optional[str] = None


def _energy_counter(calibration: Calibration) -> Optional[str]:
    if calibration.energy_update_period_s is not None:
        return f"updates every {1e3 * calibration.energy_update_period_s:.0f} ms"
    return calibration.energy_counter


def ceiling_rows(calibrations: Iterable[Calibration]) -> list[CeilingRow]:
    rows = []
    for calibration in calibrations:
        gpu = calibration.gpu_tag or "?"
        peaks = GPUS.get(gpu)
        rows.append(CeilingRow(
            gpu, calibration.env or "?", calibration.sweep_id or "?", calibration.copy_gbs,
            peaks.bandwidth_gbs if peaks else None,
            tuple((precision, tflops, peaks.peak_tflops(precision) if peaks else None)
                  for precision, tflops in sorted(calibration.gemm_tflops.items())),
            calibration.error.strip().splitlines()[-1] if calibration.error else None, _energy_counter(calibration)))
    return sorted(rows, key=lambda r: (r.gpu, r.sweep))


def _measured(row: CeilingRow) -> tuple[str, str]:
    """(copy bandwidth, matmul rates), each 'measured (spec)'."""
    copy = f"{fmt.number(row.copy_gbs, 0)} GB/s (spec {fmt.number(row.spec_gbs, 0)})"
    gemm = ", ".join(f"{precision} {fmt.number(tflops, 1 if tflops >= 10 else 3)} TFLOPS (spec {fmt.number(spec, 1)})"
                     for precision, tflops, spec in row.gemm)
    return copy, gemm + (f"; error: {row.error}" if row.error else "")


def ceilings_section(calibrations: Iterable[Calibration]) -> Optional[Section]:
    return table_section(
        "The GPU's ceilings", "measured once per GPU per sweep (spec from the catalog)",
        (Column("gpu"), Column("env"), Column("sweep"), Column("device-to-device copy (read + written)"),
         Column("matmul"), Column("energy counter")),
        tuple(text_cells(row.gpu, row.env, row.sweep, *_measured(row), row.energy_counter or "—")
              for row in ceiling_rows(calibrations)))
