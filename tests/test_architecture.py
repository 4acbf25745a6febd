"""The folders are the architecture: these checks fail when an import crosses a boundary DESIGN.md draws."""

import ast
import graphlib
import sys
import tomllib
from pathlib import Path
from typing import Optional

import pytest

REPO = Path(__file__).resolve().parents[1]
PARTS = ("schema", "workers", "orchestrator")
# what each part may import of the others (schema <- workers, schema <- orchestrator; nothing points back up)
ALLOWED = {"schema": set(), "workers": {"schema"}, "orchestrator": {"schema"}}
# workers/, bottom to top, by its top-level modules and folders: a module imports its own layer and those below it,
# never one above, at module level or inside a function
WORKER_LAYERS = (
    ("interface",),  # what a workflow is and returns: Workflow, WorkflowContext, Unsupported, Generation, LLMRunner
    ("models",),
    ("stacks",),  # helpers shared by one stack's workflows
    ("kernels",),  # mlcbench's own Triton kernels, which handtuned_decode injects into the compiled decode step
    ("decode",),  # decode loops
    ("workflows",),
    ("measurement",),  # timers, correctness, and the device, host and package probes
    ("exchange", "orphan", "cache_environment"),  # the worker's files, its lifetime beside the host, its libraries' folders
    ("runner",),
    ("command",),  # the worker's command line
    ("zygote",),  # the pre-imported interpreter that forks workers
    ("__main__",),
)
# orchestrator/, bottom to top, the same way
ORCHESTRATOR_LAYERS = (
    ("errors", "workdirs", "stats", "fractions"),  # stats: the intervals of a cell and of a speedup; fractions: of a bound
    ("outputs", "gpu", "envs", "suites"),
    ("planner",),  # what is due: the one rule for a sweep and for a Slurm array task
    ("store",),
    ("runtimes",),  # ways to start a worker, the registry of env runtime kinds, and Slurm's side of an array
    ("sweep",),  # the sweep loop, its cells, the reading back of a killed sweep, and the Slurm driver
    ("reports",),
    ("cli",),
    ("__main__",),
)
LAYERS = {"workers": WORKER_LAYERS, "orchestrator": ORCHESTRATOR_LAYERS}
LAYER = {part: {entry: rank for rank, layer in enumerate(layers) for entry in layer} for part, layers in LAYERS.items()}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["mlcbench", *parts])


def _imports(path: Path, top_level_only: bool) -> set[str]:
    """Absolute names imported by a file; top_level_only leaves out imports inside functions and TYPE_CHECKING."""
    tree = ast.parse(path.read_text(), filename=str(path))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    names = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(node, path)
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def _absolute(node: ast.ImportFrom, path: Path) -> str:
    """The module a `from ... import` names, a relative one resolved against the file's package."""
    if node.level == 0:
        return node.module
    package = _module_name(path).split(".")[:None if path.name == "__init__.py" else -1]
    return ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))


def _files(part: str) -> list[Path]:
    return sorted(path for path in (REPO / part).rglob("*.py") if "migrations/versions" not in path.as_posix())


@pytest.mark.parametrize("part", PARTS)
def test_no_part_imports_across_the_boundaries(part):
    crossings = []
    for path in _files(part):
        for name in _imports(path, top_level_only=False):
            if name.startswith("mlcbench."):
                other = name.split(".")[1]
                if other != part and other not in ALLOWED[part]:
                    crossings.append(f"{path.relative_to(REPO)} imports {name}")
    assert not crossings


def test_schema_imports_pydantic_and_the_standard_library_only():
    foreign = sorted({f"{path.relative_to(REPO)}: {name}" for path in _files("schema")
                      for name in _imports(path, top_level_only=False)
                      if name.split(".")[0] not in sys.stdlib_module_names | {"pydantic", "mlcbench"}})
    assert not foreign


def _entry(part: str, module: str) -> Optional[str]:
    """The top-level module or folder of a part that a module name lies in (None: outside the part, or its package)."""
    parts = module.split(".")
    return parts[2] if parts[:2] == ["mlcbench", part] and len(parts) > 2 else None


@pytest.mark.parametrize("part", LAYERS)
def test_every_module_and_folder_has_a_layer(part):
    entries = {_entry(part, _module_name(path)) for path in _files(part)} - {None}
    assert entries == set(LAYER[part])


@pytest.mark.parametrize("part", LAYERS)
def test_no_module_imports_a_layer_above_its_own(part):
    layer = LAYER[part]
    upward = []
    for path in _files(part):
        own = _entry(part, _module_name(path))
        if own is None:  # the part's __init__.py: the package's docstring
            continue
        for name in sorted(_imports(path, top_level_only=False)):
            other = _entry(part, name)
            if other is not None and layer[other] > layer[own]:
                upward.append(f"{path.relative_to(REPO)} ({own}) imports {name} ({other})")
    assert not upward


def test_the_orchestrator_never_imports_torch():
    assert not [path for path in _files("orchestrator") for name in _imports(path, top_level_only=False)
                if name.split(".")[0] == "torch"]


def test_no_import_loops():
    modules = {_module_name(path): path for part in PARTS for path in _files(part)}
    graph = {name: {imported for imported in _imports(path, top_level_only=True) if imported in modules} - {name}
             for name, path in modules.items()}
    graphlib.TopologicalSorter(graph).prepare()  # raises CycleError naming the loop


def test_every_package_folder_is_installed():
    declared = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {_module_name(init.parent / "__init__.py") for part in PARTS for init in (REPO / part).rglob("__init__.py")}
    folders.add("mlcbench.orchestrator.store.migrations.versions")  # Alembic's scripts: a folder of modules
    folders.add("mlcbench.envs")  # the env definitions: data the installed package carries
    folders.add("mlcbench.examples")  # the example suites (benchmarks/suites/): data the installed package carries
    assert folders == declared
