"""Workflow registry: the workflow named in a job is the one Workflow subclass defined in
mlcbench.workers.workflows.<name>, imported only when a job asks for it; what it runs and needs comes from the
catalog's table (schema/catalog.py)."""

import importlib
import importlib.util
import os
import sys

from mlcbench.schema import FAULT_WORKFLOWS, WORKFLOWS
from mlcbench.schema.catalog import missing_requirements
from mlcbench.workers.interface import Unsupported, Workflow

FAULTS_ENV = "MLCBENCH_TEST_FAULTS"


class WorkflowModuleError(Exception):
    """A workflow module that does not define exactly one Workflow subclass (a mistake in this code, not the env)."""


def load(name: str) -> Workflow:
    if name in FAULT_WORKFLOWS and os.environ.get(FAULTS_ENV) == "1":
        from mlcbench.workers.workflows.faults import FAULTS

        return FAULTS[name]()
    info = WORKFLOWS.get(name)
    if info is None:
        raise Unsupported(f"workflow {name!r} is unknown")
    missing = [package for package in info.requires if not _installed(package)]
    if missing:
        raise Unsupported(missing_requirements(name, missing))
    try:
        module = importlib.import_module(f"{__name__}.{name}")
    except ImportError as error:
        raise Unsupported(f"{name}: {error.name or error} not importable in this environment") from None
    return workflow_class(module)()


def workflow_class(module) -> type[Workflow]:
    """The one Workflow subclass a module defines (classes it imports do not count)."""
    defined = [value for value in vars(module).values() if isinstance(value, type) and issubclass(value, Workflow)
               and value.__module__ == module.__name__]
    if len(defined) != 1:
        raise WorkflowModuleError(f"{module.__name__} defines {len(defined)} Workflow subclasses "
                                  f"({', '.join(cls.__name__ for cls in defined) or 'none'}); a workflow module "
                                  f"defines exactly one")
    return defined[0]


def _installed(package: str) -> bool:
    """Importable, judged without importing it (a stand-in already in sys.modules counts)."""
    if package in sys.modules:
        return sys.modules[package] is not None
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False
