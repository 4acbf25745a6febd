"""Workflow registry: the workflow named in a job is the Workflow subclass of mlcbench.workers.workflows.<name>,
imported only when a job asks for it; what it needs comes from the catalog's table (schema/catalog.py)."""

import importlib
import importlib.util
import os
import sys

from mlcbench.schema import FAULT_WORKFLOWS, WORKFLOWS
from mlcbench.workers.workflows.base import Unsupported, Workflow

FAULTS_ENV = "MLCBENCH_TEST_FAULTS"
_FAULTS_MODULE = "faults"


def load(name: str) -> Workflow:
    if name in FAULT_WORKFLOWS and os.environ.get(FAULTS_ENV) == "1":
        return _workflow_in(_FAULTS_MODULE, name)
    info = WORKFLOWS.get(name)
    if info is None:
        raise Unsupported(f"workflow {name!r} is unknown")
    missing = [package for package in info.requires if not _installed(package)]
    if missing:
        raise Unsupported(f"{name}: {', '.join(missing)} not importable in this environment")
    try:
        return _workflow_in(name, name)
    except ImportError as error:
        raise Unsupported(f"{name}: {error.name or error} not importable in this environment") from None


def _workflow_in(module_name: str, name: str) -> Workflow:
    module = importlib.import_module(f"{__name__}.{module_name}")
    [workflow] = [value for value in vars(module).values()
                  if isinstance(value, type) and issubclass(value, Workflow) and value.__dict__.get("name") == name]
    return workflow()


def _installed(package: str) -> bool:
    """Importable, judged without importing it (a stand-in already in sys.modules counts)."""
    if package in sys.modules:
        return sys.modules[package] is not None
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False
