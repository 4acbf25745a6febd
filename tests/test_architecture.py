"""The folders are the architecture: these checks fail when an import crosses a boundary DESIGN.md draws."""

import ast
import graphlib
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PARTS = ("schema", "workers", "orchestrator")
# what each part may import of the others (schema <- workers, schema <- orchestrator; nothing points back up)
ALLOWED = {"schema": set(), "workers": {"schema"}, "orchestrator": {"schema"}}


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
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


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
    assert folders == declared
