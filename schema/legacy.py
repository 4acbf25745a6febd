"""The shapes earlier versions stored jobs in, and hashed job ids from: the one place they live. A stored job is read
through stored_job into today's JobSpec, and every job is hashed through hashed_json in the first stores' shape, so
that a job id (and a cell's settings) written by any version stays what it was.

The earlier shapes: every job carried one record of every workflow's options (their union, each unread one at its
default); handtuned_decode's jobs were torch_compile_decode's with a kernel option set; a repetition carried
max_processes and max_s, the bounds of an adaptive rule no sweep follows any more."""

from typing import Any

from pydantic import Field, TypeAdapter

from mlcbench.schema.base import StrictModel
from mlcbench.schema.catalog import WORKFLOWS
from mlcbench.schema.options import OPTION_CLASSES

# The options the first stores hashed into every job id, set or not
_ALWAYS_HASHED = ("compile_mode", "io_binding", "min_block_size", "fp32_accumulation")
# The order job ids hash the later options in, as they were added; an option added since goes after them, and into
# the hash only while set
_HASH_ORDER = (*_ALWAYS_HASHED, "fused_projections", "pdl", "triton_gemv", "triton_attention", "prefill_graph",
               "triton_gemm")


def _union_defaults() -> dict[str, Any]:
    defaults: dict[str, Any] = {}
    for options in OPTION_CLASSES:
        for name, field in options.model_fields.items():
            defaults.setdefault(name, field.default)
    return {name: defaults[name] for name in (*_HASH_ORDER, *(name for name in defaults if name not in _HASH_ORDER))}


# each option's value in the union record where the job's workflow does not read it
_UNION_DEFAULTS = _union_defaults()
# the options added after the first stores: hashed only while set, so that unset they keep every older job id
LATER_OPTIONS = tuple(name for name in _UNION_DEFAULTS if name not in _ALWAYS_HASHED)
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
        read = WORKFLOWS[data["workflow"]].options.model_fields if data.get("workflow") in WORKFLOWS else {}
        data["options"] = {name: value for name, value in options.items()
                           if name in read or name not in _UNION_DEFAULTS or value != _UNION_DEFAULTS[name]}
    repetition = data.get("repetition")
    if isinstance(repetition, dict) and any(name in repetition for name in RETIRED_REPETITION):
        repetition = dict(repetition)
        retired = {name: repetition.pop(name) for name in RETIRED_REPETITION if name in repetition}
        implied = {"max_processes": repetition.get("processes", 3), "max_s": _RETIRED_DEFAULT_MAX_S}
        data["repetition"] = repetition
        if any(retired[name] != implied[name] for name in retired):
            data["retired_repetition"] = {**implied, **retired}
    return data


def hashed_json(job: dict[str, Any], exclude: set[str]) -> str:
    """The JSON a job's hashes read, from the job as JobSpec dumps it (mode="json"): in the first stores' shape (its
    options as the union record, less the options added later while they are unset; its repetition with the retired
    knobs; a workflow built on another under that one's name), less the timeout (a limit, not a setting), a catalog
    model's model_info and `exclude`."""
    data = dict(job)
    info = WORKFLOWS.get(data["workflow"])
    if info is not None and info.builds_on:
        data["workflow"] = info.builds_on
    retired, repetition = data["retired_repetition"] or {}, data["repetition"]
    data["repetition"] = {
        "processes": repetition["processes"],
        "max_processes": retired.get("max_processes", repetition["processes"]),
        "target": repetition["target"],
        "max_s": retired.get("max_s", _RETIRED_DEFAULT_MAX_S),
    }
    given = data["options"]
    record = {name: given.get(name, default) for name, default in _UNION_DEFAULTS.items()}
    data["options"] = {name: value for name, value in record.items() if name not in LATER_OPTIONS or value is not None}
    for name in ("timeout_s", "retired_repetition", *exclude):
        data.pop(name, None)
    if data.get("model_info", {}) is None:
        data.pop("model_info")
    return _AS_JSON.dump_json(data).decode()
