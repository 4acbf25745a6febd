"""The catalog (schema/catalog.py) is the one table of workflows; everything else that names them is checked against
it here, without torch: the workflow modules and their methods (read as source), every env.toml, the README's
support matrix, and the worker's loader."""

import ast
import re
import types
from fnmatch import fnmatch
from pathlib import Path
from typing import get_args

import pytest
from pydantic import ValidationError

from mlcbench.orchestrator.envs import build_files, env_names, load_env
from mlcbench.schema import REFERENCE, WORKFLOWS, EnvSpec, ModelKind, why_not_run
from mlcbench.workers.workflows import WorkflowModuleError, workflow_class
from mlcbench.workers.interface import Workflow

REPO = Path(__file__).resolve().parents[1]
WORKFLOWS_DIR = REPO / "workers" / "workflows"
NOT_WORKFLOWS = {"__init__", "faults"}
# the method a workflow implements for each model kind it runs
METHODS: dict[str, str] = {"synthetic": "compile_module", "llm": "prepare_llm"}


def _classes(module: str) -> dict[str, ast.ClassDef]:
    tree = ast.parse((WORKFLOWS_DIR / f"{module}.py").read_text())
    return {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}


def _base_names(node: ast.ClassDef) -> list[str]:
    """Its bases' names, less their type parameters (`Workflow[NoOptions]`: Workflow)."""
    bases = [base.value if isinstance(base, ast.Subscript) else base for base in node.bases]
    return [base.id if isinstance(base, ast.Name) else ast.unparse(base) for base in bases]


def _options_parameter(module: str, node: ast.ClassDef) -> str:
    """The options class a workflow class is parametrised by, through its bases: a TypeVar as its bound."""
    for base in node.bases:
        if isinstance(base, ast.Subscript):
            name = ast.unparse(base.slice)
            bounds = {target.id: keyword.value for item in ast.parse((WORKFLOWS_DIR / f"{module}.py").read_text()).body
                      if isinstance(item, ast.Assign) and isinstance(item.value, ast.Call)
                      for target in item.targets if isinstance(target, ast.Name)
                      for keyword in item.value.keywords if keyword.arg == "bound"}
            return ast.unparse(bounds[name]) if name in bounds else name
    for base in _base_names(node):
        for other in _module_names():
            if base in _workflow_classes(other):
                return _options_parameter(other, _classes(other)[base])
    raise AssertionError(f"{module}.{node.name} names no options class: Workflow[ItsOptions]")


def _workflow_classes(module: str) -> dict[str, ast.ClassDef]:
    """The classes a module defines that derive from Workflow, directly or through another workflow's class."""
    all_classes = {name: node for other in _module_names() for name, node in _classes(other).items()}

    def is_workflow(node: ast.ClassDef) -> bool:
        return any(base == "Workflow" or (base in all_classes and is_workflow(all_classes[base]))
                   for base in _base_names(node))

    return {name: node for name, node in _classes(module).items() if is_workflow(node)}


def _module_names() -> set[str]:
    return {path.stem for path in WORKFLOWS_DIR.glob("*.py")} - NOT_WORKFLOWS


def _own_methods(node: ast.ClassDef) -> set[str]:
    return {item.name for item in node.body if isinstance(item, ast.FunctionDef)} | {
        target.id for item in node.body if isinstance(item, ast.Assign) for target in item.targets
        if isinstance(target, ast.Name)}


def _methods_with_bases(module: str, node: ast.ClassDef) -> set[str]:
    """What a workflow class defines itself or inherits from another workflow module's class."""
    methods = _own_methods(node)
    for base in _base_names(node):
        for other in _module_names():
            if base in _workflow_classes(other):
                methods |= _methods_with_bases(other, _classes(other)[base])
    return methods


def test_every_catalog_row_is_a_workflow_module_and_every_module_a_row():
    assert set(WORKFLOWS) == _module_names()
    assert all(name == info.name for name, info in WORKFLOWS.items())
    assert REFERENCE in WORKFLOWS


@pytest.mark.parametrize("module", sorted(_module_names()))
def test_each_workflow_module_defines_one_workflow_class_with_no_name_to_repeat(module):
    [(_, node)] = _workflow_classes(module).items()
    assert "name" not in _own_methods(node)  # the loader names it from its module


@pytest.mark.parametrize("name", sorted(WORKFLOWS))
def test_a_workflow_class_is_parametrised_by_its_rows_options_class(name):
    [(_, node)] = _workflow_classes(name).items()
    assert _options_parameter(name, node) == WORKFLOWS[name].options.__name__


@pytest.mark.parametrize("name", sorted(WORKFLOWS))
def test_a_workflow_implements_the_kinds_the_catalog_says_it_runs_and_no_other(name):
    info = WORKFLOWS[name]
    assert set(METHODS) == set(get_args(ModelKind))
    [(_, node)] = _workflow_classes(name).items()
    for kind in info.kinds:
        assert METHODS[kind] in _methods_with_bases(name, node), f"{name} runs {kind} models: {METHODS[kind]}"
    for kind, reason in info.why_not.items():
        assert reason.strip()
        # the catalog refuses the kind before a worker starts: a method refusing it again would be a second answer
        assert METHODS[kind] not in _own_methods(node), f"{name}: the catalog refuses {kind} models"


def test_the_catalog_refuses_a_wrong_kind_with_its_reason_and_passes_names_it_does_not_know():
    assert WORKFLOWS["torch_compile_tensorrt"].why_not["llm"] in why_not_run("torch_compile_tensorrt", "llama-2layer")
    assert "llm" not in WORKFLOWS["torch_compile_tensorrt"].kinds
    assert why_not_run("torch_compile_tensorrt", "ffn-small") is None
    assert why_not_run("fault-kill", "ffn-small") is None


@pytest.mark.parametrize("env", env_names())
def test_every_env_toml_names_catalog_workflows_only(env):
    assert load_env(env).workflows  # load_env validates them (EnvSpec)


@pytest.mark.parametrize("name", [name for name, info in WORKFLOWS.items() if info.techniques])
def test_a_workflows_techniques_are_options_a_job_sets_and_fields_its_result_records(name):
    from mlcbench.schema import Applied
    from mlcbench.schema.legacy import LATER_OPTIONS

    for technique in WORKFLOWS[name].techniques:
        assert technique in WORKFLOWS[name].options.model_fields and technique in Applied.model_fields, technique
        # unset, an option leaves the job id of specs written before it existed
        assert technique in LATER_OPTIONS, technique


def test_an_env_naming_a_workflow_the_catalog_lacks_is_refused_with_the_name():
    with pytest.raises(ValidationError, match="'torch_compiel' not in the catalog"):
        EnvSpec(name="mine", runtime="local", workflows=["eager", "torch_compiel"])


def _support_matrix() -> dict[str, str]:
    """workflow -> its 'envs that offer it' cell, from docs/support.md's matrix, in the table's order."""
    section = (REPO / "docs" / "support.md").read_text()
    table = section[section.index("\n| workflow |"):].split("\n\n", 1)[0]
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in table.splitlines()
            if line.startswith("| `")]
    return {re.fullmatch(r"`(\w+)`", row[0]).group(1): row[-1] for row in rows}


def test_the_support_matrix_lists_the_catalogs_workflows_in_its_order_with_the_envs_that_offer_them():
    matrix = _support_matrix()
    assert list(matrix) == list(WORKFLOWS)
    envs = {name: load_env(name) for name in env_names()}
    for workflow, cell in matrix.items():
        named = set(envs) if cell == "all" else {
            env for pattern in cell.split(", ") for env in envs if fnmatch(env, pattern)}
        assert named == {env for env, spec in envs.items() if spec.provides(workflow)}, workflow


def _module(name: str, **classes: type) -> types.ModuleType:
    module = types.ModuleType(name)
    for class_name, cls in classes.items():
        cls.__module__ = name
        setattr(module, class_name, cls)
    return module


def test_the_loader_takes_a_modules_one_workflow_class_and_names_it_after_the_module():
    imported = type("Imported", (Workflow,), {})  # a class a module imports does not count
    module = _module("mlcbench.workers.workflows.mine", Mine=type("Mine", (Workflow,), {}))
    module.Imported = imported
    assert workflow_class(module)().name == "mine"


@pytest.mark.parametrize("classes", [{}, {"One": type("One", (Workflow,), {}), "Two": type("Two", (Workflow,), {})}])
def test_a_workflow_module_with_zero_or_two_workflow_classes_is_a_clear_error(classes):
    with pytest.raises(WorkflowModuleError, match=f"defines {len(classes)} Workflow subclasses"):
        workflow_class(_module("mlcbench.workers.workflows.mine", **classes))


def _docs_envs_table() -> list[str]:
    """The env names of docs/environments.md's table."""
    section = (REPO / "docs" / "environments.md").read_text()
    table = section[section.index("\n| env |"):].split("\n\n", 1)[0]
    return [re.fullmatch(r"`([\w.-]+)`", line.split("|")[1].strip()).group(1) for line in table.splitlines()
            if line.startswith("| `")]


@pytest.mark.parametrize("env", env_names())
def test_every_docker_env_has_a_dockerfile_and_a_docs_row(env):
    spec = load_env(env)
    if spec.runtime == "docker":
        assert "Dockerfile" in build_files(spec), f"envs/{env}: a docker env builds a Dockerfile (its own or build_from's)"
    assert env in _docs_envs_table()


def test_contributing_names_only_tests_that_exist():
    """CONTRIBUTING.md says which tests hold each step: every one it names is there."""
    named = re.findall(r"`(tests/[\w/]+\.py)(?:::(\w+))?`", (REPO / "CONTRIBUTING.md").read_text())
    assert len(named) >= 10
    for path, function in named:
        assert (REPO / path).is_file(), path
        if function:
            tree = ast.parse((REPO / path).read_text())
            assert function in {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}, \
                f"{path}::{function}"


def test_every_row_but_eager_has_a_typical_compile_cost_and_a_row_built_on_another_inherits_one():
    from mlcbench.schema import REFERENCE
    from mlcbench.schema.catalog import TypicalCompile

    for kind in ("synthetic", "llm"):
        assert WORKFLOWS[REFERENCE].typical_compile(kind) is None
        assert [name for name, info in WORKFLOWS.items()
                if name != REFERENCE and info.typical_compile(kind) is None] == []
    built_on = next(info for info in WORKFLOWS.values() if info.builds_on)
    bare = built_on.model_copy(update={"compile_cost": None})
    assert bare.typical_compile("llm") == WORKFLOWS[built_on.builds_on].typical_compile("llm")
    assert TypicalCompile(seconds=75, per_billion_s=7).for_model(1.1) == pytest.approx(82.7)


def test_an_llm_s_compile_cost_is_its_own_where_a_row_gives_one():
    torchax = WORKFLOWS["torchax"]
    assert torchax.typical_compile("llm") == torchax.llm_compile_cost != torchax.compile_cost
    assert torchax.typical_compile("synthetic") == torchax.compile_cost
    synthetic_only = torchax.model_copy(update={"llm_compile_cost": None})
    assert synthetic_only.typical_compile("llm") == torchax.compile_cost
    assert torchax.llm_compile_cost.for_model(1.1) > 100 > torchax.compile_cost.for_model(0)


def test_the_plan_counts_handtuned_decode_s_compile():
    """It compiles as torch_compile_decode does (82-130 s a cold process in benchmarks/studies/decode-kernels): a plan
    that thought it compiled nothing said a minute for it."""
    from mlcbench.orchestrator.sweep.schedule import Estimator, cold_processes
    from mlcbench.schema import JobSpec

    job = JobSpec(model="tinyllama-1.1b", workflow="handtuned_decode", precision="bf16", batch_size=1,
                  options={"triton_gemv": True})
    eager = JobSpec(model="tinyllama-1.1b", workflow="eager", precision="bf16", batch_size=1)
    assert cold_processes(job, cold_first=True) == 1
    assert 82 <= Estimator().process_s(job, cold=True) - Estimator().process_s(eager, cold=True) <= 130
