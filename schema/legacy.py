"""The shapes earlier versions stored jobs in, and hashed job ids from: the one place they live. A stored job is read
through stored_job into today's JobSpec, and every job is hashed through hashed_json in the first stores' shape, so
that a job id (and a cell's settings) written by any version stays what it was.

The earlier shapes: every job carried one record of every workflow's options (their union, each unread one at its
default, and an option left at the workflow's default as None); handtuned_decode's jobs were torch_compile_decode's
with a kernel option set; a repetition carried max_processes and max_s, the bounds of an adaptive rule no sweep
follows any more."""

from typing import Any

from pydantic import Field, TypeAdapter

from mlcbench.schema.base import StrictModel
from mlcbench.schema.catalog import WORKFLOWS

# Each option as the first stores wrote it where a job left it out (None: the workflow's own default, which today's
# options classes give): a job with an option at today's default hashes as these, so it keeps the id it had unset
_STORED_UNSET: dict[str, Any] = {"compile_mode": None, "io_binding": True, "min_block_size": None,
                                 "fp32_accumulation": None}
# The order job ids hash the later options in, as they were added: hashed only while set away from their default, so
# that unset they keep every older job id; an option added since goes after them
LATER_OPTIONS = ("fused_projections", "pdl", "triton_gemv", "triton_attention", "prefill_graph", "triton_gemm")
# pydantic's JSON, as a model's own dump writes it
_AS_JSON = TypeAdapter(dict[str, Any])
# what a repetition's retired knobs were when a job did not set them
_RETIRED_DEFAULT_MAX_S = 600.0
# the retired knobs of a repetition, and what replaces each: the error a suite or job file setting one gets
RETIRED_REPETITION = {
    "max_processes": "retired: a cell runs exactly `processes` worker processes, a count fixed before any is timed; "
                     "set processes and remove max_processes",
    "max_s": "retired: no sweep stops a cell after a time; timeout_s bounds each process; remove max_s",
}


class RetiredRepetition(StrictModel):
    """The retired knobs of a stored job that set them away from what they are now implied to be (max_processes =
    processes, max_s = 600): no sweep follows them; they are kept only so that its job id stays."""

    max_processes: int = Field(ge=1, le=100)
    max_s: float = Field(gt=0, le=86400)


def stored_job(data: Any) -> Any:
    """A job as any version stored it (a result's `job`), in today's shape: the union record's options its workflow
    does not read, at their defaults, dropped (one set away from its default stays, and is refused); a
    torch_compile_decode job with a kernel on read as handtuned_decode; a repetition's retired knobs moved to
    retired_repetition where they differ from what is implied. A job in today's shape is returned as it is."""
    if not isinstance(data, dict):
        return data
    data = dict(data)
    options = data.get("options")
    if isinstance(options, dict):
        for name, info in WORKFLOWS.items():
            if info.builds_on == data.get("workflow") and any(options.get(own) for own in info.own_options()):
                data["workflow"] = name
        data["options"] = {name: value for name, value in options.items() if not _left_out(name, value)}
    repetition = data.get("repetition")
    if isinstance(repetition, dict) and any(name in repetition for name in RETIRED_REPETITION):
        repetition = dict(repetition)
        retired = {name: repetition.pop(name) for name in RETIRED_REPETITION if name in repetition}
        implied = {"max_processes": repetition.get("processes", 3), "max_s": _RETIRED_DEFAULT_MAX_S}
        data["repetition"] = repetition
        if any(retired[name] != implied[name] for name in retired):
            data["retired_repetition"] = {**implied, **retired}
    return data


def _left_out(name: str, value: Any) -> bool:
    """A stored option at what the first stores wrote for it unset (None for an option added later)."""
    return value == _STORED_UNSET.get(name) and (name in _STORED_UNSET or name in LATER_OPTIONS)


def hashed_json(job: dict[str, Any], exclude: set[str]) -> str:
    """The JSON a job's hashes read, from the job as JobSpec dumps it (mode="json"): in the first stores' shape (its
    options as the union record, each at its default as the first stores wrote it unset, less the options added later
    while they are at their default; its repetition with the retired knobs; a workflow built on another under that
    one's name), less the timeout (a limit, not a setting), a catalog
    model's model_info and `exclude`."""
    data = dict(job)
    info = WORKFLOWS.get(data["workflow"])
    defaults = info.options.model_fields if info is not None else {}
    if info is not None and info.builds_on:
        data["workflow"] = info.builds_on
    retired, repetition = data["retired_repetition"] or {}, data["repetition"]
    data["repetition"] = {
        "processes": repetition["processes"],
        "max_processes": retired.get("max_processes", repetition["processes"]),
        "target": repetition["target"],
        "max_s": retired.get("max_s", _RETIRED_DEFAULT_MAX_S),
    }
    given = {name: value for name, value in data["options"].items()
             if name not in defaults or value != defaults[name].default}
    data["options"] = {**{name: given.get(name, unset) for name, unset in _STORED_UNSET.items()},
                       **{name: given[name] for name in LATER_OPTIONS if name in given}}
    for name in ("timeout_s", "retired_repetition", *exclude):
        data.pop(name, None)
    if data.get("model_info", {}) is None:
        data.pop("model_info")
    return _AS_JSON.dump_json(data).decode()
