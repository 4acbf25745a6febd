"""Reading a selection's results from the store: the only reports module that touches the store; everything else
derives what it shows from the results these return."""

from mlcbench.orchestrator.reports.selection import Selection
from mlcbench.orchestrator.store import Store
from mlcbench.schema import Result


def load_results(store: Store, selection: Selection) -> list[Result]:
    """The result of each selected cell (the store's rule: its latest ok attempt, else ...)."""
    return store.cells(gpu_tag=selection.gpus or None, env=selection.envs or None, model=selection.models or None,
                       workflow=selection.workflows or None, status=selection.statuses or None)


def load_attempts(store: Store, selection: Selection) -> list[Result]:
    """Every stored attempt of the selected cells (compile cost cold and warm comes from repeated runs of a cell)."""
    return store.history(gpu_tag=selection.gpus or None, env=selection.envs or None, model=selection.models or None,
                         workflow=selection.workflows or None)
