"""Suites are TOML files: the built-in ones ship in `builtin_suites/` (`mlcbench suites --show NAME` prints one to copy
and edit), and `--suite FILE.toml` reads anyone's. A suite's own models (`[models.NAME]`) are resolved here: an LLM's
config.json is read from its folder or the local Hugging Face cache (no network), so that the job specs carry it to
workers in any container."""

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from pydantic import ValidationError

from mlcbench.orchestrator.errors import UsageError
from mlcbench.schema import MODELS, WORKFLOWS, ModelInfo, Suite
from mlcbench.schema.hf_config import ConfigError, llm_from_hf_config
from mlcbench.schema.jobs import known_workflow
from mlcbench.schema.suites import ModelDefinition

BUILTIN_DIR = Path(__file__).parent / "builtin_suites"
# the worker-side module that says whether this interpreter's transformers can build a config as a causal LM
ARCHITECTURE_CHECK = "mlcbench.workers.models.check"


def builtin_names() -> list[str]:
    """The defaults (on a GPU, on a CPU) first, then the others alphabetically."""
    defaults = [default_suite("cuda"), default_suite("cpu")]
    return sorted((path.stem for path in BUILTIN_DIR.glob("*.toml")),
                  key=lambda name: (defaults.index(name) if name in defaults else len(defaults), name))


def builtin_text(name: str) -> str:
    if name not in builtin_names():
        raise UsageError(f"unknown suite {name!r}; known: {', '.join(builtin_names())}, or a .toml file")
    return (BUILTIN_DIR / f"{name}.toml").read_text(encoding="utf-8")


def suite_file(name_or_path: str) -> Optional[Path]:
    """The file a suite argument names (a path, or any name ending in .toml); None for a built-in suite's name."""
    path = Path(name_or_path).expanduser()
    return path if name_or_path.endswith(".toml") or path.is_file() else None


def suite_text(name_or_path: str, option: str) -> str:
    """The TOML text of a built-in suite or of a suite file."""
    path = suite_file(name_or_path)
    if path is None:
        return builtin_text(name_or_path)
    if not path.is_file():
        raise UsageError(f"{option} {name_or_path}: no such file")
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"{option} {name_or_path}: cannot read it ({error})") from None


def get_suite(name_or_path: str) -> Suite:
    """A built-in suite by name, or a suite file (a path, or any name ending in .toml)."""
    text = suite_text(name_or_path, "--suite")
    path = suite_file(name_or_path)
    if path is None:
        return parse_suite(text, name_or_path, BUILTIN_DIR)
    return parse_suite(text, str(path), path.parent)


def parse_suite(text: str, source: str, folder: Path) -> Suite:
    """A suite from TOML text; errors name `source`, the entry and the field. Config folders are relative to `folder`."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise UsageError(f"{source}: not valid TOML: {error}") from None
    return suite_from_data(data, source, folder)


def suite_from_data(data: dict[str, Any], source: str, folder: Path) -> Suite:
    if "resolved_models" in data:
        raise UsageError(f"{source}: resolved_models is filled from [models]; define models there")
    try:
        suite = Suite.model_validate(data)
    except ValidationError as error:
        raise UsageError(f"{source}: {every_error(error)}") from None
    suite = suite.model_copy(update={"resolved_models": {
        name: resolve_model(name, definition, folder, source) for name, definition in suite.models.items()}})
    for index, entry in enumerate(suite.entries):
        for model in entry.models:
            info = suite.resolved_models.get(model) or MODELS[model]
            if info.kind == "llm" and info.max_position_embeddings \
                    and entry.input_len + entry.output_len > info.max_position_embeddings:
                raise UsageError(f"{source}: entries[{index}]: {entry.input_len} tokens in + {entry.output_len} out "
                                 f"is beyond {model}'s {info.max_position_embeddings} positions "
                                 f"(max_position_embeddings)")
    return suite


def every_error(error: ValidationError) -> str:
    """Each problem with where it is (entries[0].workflows[1]: ...), on one line: a user mends them all at once."""
    problems = []
    for problem in error.errors():
        where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" if part.isidentifier() or part == "[key]"
                        else f"[{part!r}]" for part in problem["loc"]).lstrip(".")
        message = problem["msg"].removeprefix("Value error, ")
        problems.append(f"{where}: {message}" if where else message)
    return "; ".join(problems)


def resolve_model(name: str, definition: ModelDefinition, folder: Path, source: str) -> ModelInfo:
    """The model a definition describes; an LLM's config.json read from its folder or the Hugging Face cache."""
    if definition.config is None:
        return definition.synthetic_info()
    where = f"{source}: models.{name}.config"
    config = read_hf_config(definition.config, folder, where)
    try:
        info = llm_from_hf_config(config, definition.precision)
    except (ConfigError, ValidationError) as error:
        raise UsageError(f"{where}: {error}") from None
    unknown = unknown_architecture(config)
    if unknown:
        raise UsageError(f"{where}: {unknown}")
    return info


def read_hf_config(config: str, folder: Path, where: str) -> dict[str, Any]:
    """config.json of a folder (relative to `folder`), or of a model id in the local Hugging Face cache."""
    path = (folder / Path(config).expanduser()) if not Path(config).expanduser().is_absolute() \
        else Path(config).expanduser()
    if path.is_dir():
        file = path / "config.json"
        if not file.is_file():
            raise UsageError(f"{where}: {path} has no config.json (a Hugging Face model folder has one)")
    elif path.is_file() and path.name.endswith(".json"):
        file = path
    else:
        file = _cached_config(config, where)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UsageError(f"{where}: {file} is not a readable JSON file ({error})") from None
    if not isinstance(data, dict):
        raise UsageError(f"{where}: {file} holds no JSON object")
    return data


def _cached_config(model_id: str, where: str) -> Path:
    """config.json of a Hub model id from the local cache only (nothing is downloaded)."""
    if model_id.count("/") != 1 or model_id.startswith((".", "/", "~")):
        raise UsageError(f"{where}: {model_id!r} is neither a folder nor a Hugging Face model id (owner/name)")
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        raise UsageError(f"{where}: {model_id!r} is not a folder, and huggingface_hub (which reads the local "
                         f"Hugging Face cache) is not installed here; give the model's folder") from None
    found = try_to_load_from_cache(model_id, "config.json")
    if not isinstance(found, str):
        raise UsageError(f"{where}: {model_id!r} is not a folder, nor in the local Hugging Face cache (mlcbench "
                         f"downloads nothing: `hf download {model_id} config.json` first, or give its folder)")
    return Path(found)


def unknown_architecture(config: dict[str, Any]) -> Optional[str]:
    """Why this interpreter's transformers cannot build the config as a causal LM, or None when it can or when
    transformers is not installed here (the worker then reports it). Asked in a subprocess: the orchestrator never
    imports torch, which transformers' model registry does."""
    try:
        check = subprocess.run([sys.executable, "-m", ARCHITECTURE_CHECK], input=json.dumps(config), text=True,
                               capture_output=True, timeout=300, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    except (OSError, subprocess.TimeoutExpired):
        return None  # no answer here: the worker reports what its own transformers makes of it
    return (check.stdout.strip() or None) if check.returncode == 0 else None


def check_workflow_option(workflows: Sequence[str]) -> None:
    """--workflow's values, each a workflow of the catalog: a UsageError naming the option, not the suite's field."""
    for workflow in workflows:
        try:
            known_workflow(workflow)
        except ValueError as error:
            raise UsageError(f"--workflow: {error}") from None


def grid_suite(models: list[str], workflows: list[str], batch_sizes: list[int], input_len: Optional[int],
               output_len: Optional[int], options: Optional[Mapping[str, str]] = None) -> Suite:
    """A one-entry suite from the command line, validated as a suite file is: each model a catalog name, a folder
    with a config.json (named after the folder) or a model id in the local Hugging Face cache; the options (--option)
    each read by every workflow."""
    if not workflows:
        raise UsageError("a grid from the command line needs --workflow (e.g. eager,torch_compile_static)")
    check_workflow_option(workflows)
    for workflow in workflows:
        try:
            WORKFLOWS[workflow].read_options(options or {}) if workflow in WORKFLOWS else None
        except ValueError as error:
            raise UsageError(f"--option: {error}") from None
    own: dict[str, dict[str, str]] = {}
    names = []
    for model in models:
        if model in MODELS:
            names.append(model)
            continue
        name = Path(model.rstrip("/")).name if Path(model).expanduser().exists() else model.replace("/", "--")
        if name in MODELS:
            raise UsageError(f"--model {model}: its name {name!r} is a catalog model's; rename the folder")
        own[name] = {"config": str(Path(model).expanduser().absolute()) if Path(model).expanduser().exists()
                     else model}
        names.append(name)
    entry: dict[str, Any] = {"models": names, "workflows": workflows, "batch_sizes": batch_sizes or [1],
                             "options": dict(options or {})}
    entry.update({key: value for key, value in (("input_len", input_len), ("output_len", output_len))
                  if value is not None})
    data = {"name": "command-line", "description": "a grid given on the command line", "models": own,
            "entries": [entry]}
    return suite_from_data(data, "the command line", Path.cwd())


def default_suite(device: str) -> str:
    return "paper" if device == "cuda" else "smoke"


# what a checkpoint must share with the model it gives weights to (its precision and positions may differ)
_SAME_MODEL_FIELDS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                      "num_key_value_heads", "vocab_size", "attention_head_dim", "tie_word_embeddings", "qkv_bias",
                      "o_bias", "mlp_bias", "num_experts")


def check_checkpoint(model: str, folder: Path, swept: Mapping[str, ModelInfo]) -> Path:
    """The folder, once its config.json is found to describe `model` (an LLM of the sweep): same architecture, same
    dims. Anything else would be stored, and judged, as a model it is not."""
    option = f"--checkpoint {model}={folder}"
    info = swept.get(model)
    if info is None or info.kind != "llm":
        llms = ", ".join(name for name, other in swept.items() if other.kind == "llm") or "none"
        what = "not a model of this sweep" if info is None else "not an LLM of the catalog or of the suite"
        raise UsageError(f"{option}: {what} (this sweep's LLMs: {llms})")
    if not (folder / "config.json").is_file():
        raise UsageError(f"{option}: no config.json there (a Hugging Face model folder)")
    config = read_hf_config(str(folder), Path.cwd(), option)
    try:
        theirs = llm_from_hf_config(config)
    except (ConfigError, ValidationError) as error:
        raise UsageError(f"{option}: {error}") from None
    expected_type = (info.hf_config or {}).get("model_type", "llama")
    differences = [f"model_type {config.get('model_type')!r} (not {expected_type!r})"] \
        if config.get("model_type") != expected_type else []
    differences += [f"{name} {getattr(theirs, name)} (not {getattr(info, name)})" for name in _SAME_MODEL_FIELDS
                    if getattr(theirs, name) != getattr(info, name)]
    if differences:
        raise UsageError(f"{option}: its config.json is not {model}'s: {'; '.join(differences)}. To run it as a "
                         f"model of its own: --model {folder}, or config = \"{folder}\" under [models.NAME] in a "
                         f"suite file")
    return folder.resolve()
