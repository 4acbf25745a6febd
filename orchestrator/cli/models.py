"""`mlcbench models` (the models a sweep can name: the catalog's, with the built-in suites that run them, and a suite's
own) and `mlcbench examples FOLDER` (the example suites and their models' config.json, copied out of the package)."""

import shutil
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from mlcbench.orchestrator.cli.console import console, exits_cleanly
from mlcbench.orchestrator.errors import UsageError
from mlcbench.orchestrator.suites import builtin_names, get_suite
from mlcbench.schema import MODELS
from mlcbench.schema.catalog import ModelInfo

# the example suite the README's "Benchmark your own model" shows
OWN_MODELS_EXAMPLE = "own-models.toml"


def examples_dir() -> Path:
    """The example suites: the checkout's benchmarks/suites/, or the copy an installed package carries
    (mlcbench/examples/, pyproject.toml's package data), each two folders above this one."""
    root = Path(__file__).resolve().parents[2]
    installed = root / "examples"
    return installed if installed.is_dir() else root / "benchmarks" / "suites"


def size(parameters: Optional[int]) -> str:
    """A parameter count in words (1.10B, 180K); '?' where the layout is one the formulas do not know."""
    if parameters is None:
        return "?"
    for scale, unit in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if parameters >= scale:
            return f"{parameters / scale:.2f}{unit}"
    return str(parameters)


def shape(info: ModelInfo) -> str:
    if info.kind == "synthetic":
        layers = f", {info.depth} layers" if info.depth > 1 else ""
        return f"{info.architecture} {info.hidden_size}×{info.intermediate_size}{layers}"
    return (f"{info.num_hidden_layers} layers, hidden {info.hidden_size}, {info.num_attention_heads} heads "
            f"({info.num_key_value_heads} KV), vocab {info.vocab_size}")


def models(suite: Annotated[Optional[list[str]], typer.Option(
        help="also the own models of this suite (a built-in name or FILE.toml; repeatable)")] = None) -> None:
    """List the models a sweep can name (--model, a suite entry): the catalog's, with the built-in suites that run
    each, and with --suite a suite's own; kind, parameters, precision and shape."""
    table = Table(title="models")
    for column, justify in [("model", "left"), ("kind", "left"), ("parameters", "right"), ("precision", "left"),
                            ("shape", "left"), ("from", "left")]:
        table.add_column(column, justify=justify)
    builtin = {name: get_suite(name) for name in builtin_names()}
    for name, info in MODELS.items():
        runs = [suite_name for suite_name, each in builtin.items() if any(name in e.models for e in each.entries)]
        table.add_row(name, info.kind, size(info.parameter_count()), info.default_precision, shape(info),
                      "catalog" + (f"; suites {', '.join(runs)}" if runs else ""))
    for given in suite or []:
        chosen = get_suite(given)
        for name, info in chosen.resolved_models.items():
            table.add_row(name, info.kind, size(info.parameter_count()), info.default_precision, shape(info),
                          f"suite {given}")
    console.print(table)
    console.print(f"a model of your own: `mlcbench examples FOLDER` writes the example suite ({OWN_MODELS_EXAMPLE}, "
                  f"LLMs from their config.json) to copy from", highlight=False)


def examples(folder: Annotated[Path, typer.Argument(help="a new or empty folder to write them to")]) -> None:
    """Write the example suites and their models' config.json to FOLDER: `mlcbench sweep --suite
    FOLDER/own-models.toml` runs two tiny LLMs of your own on a CPU."""
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise UsageError(f"{folder}: not an empty folder; name a new one")
    shutil.copytree(examples_dir(), folder, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    console.print(f"wrote {', '.join(sorted(path.name for path in folder.glob('*.toml')))} and configs/ to {folder}; "
                  f"run one: mlcbench sweep --suite {folder / OWN_MODELS_EXAMPLE}", highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.command()(exits_cleanly(models))
    app.command()(exits_cleanly(examples))
