"""The one interface every workflow implements."""

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, ClassVar, Optional

from mlcbench.schema import JobSpec
from mlcbench.workers.decode import Generation, LLMRunner
from mlcbench.schema.results import Setting

if TYPE_CHECKING:
    import torch


class Unsupported(Exception):
    """This workflow cannot run this job in this interpreter; the message is the reason shown to the user."""


@dataclass
class WorkflowContext:
    job: JobSpec
    device: "torch.device"
    dtype: "torch.dtype"
    cache_dir: Path
    # what the workflow actually applied (compile mode, provider, accumulation, decode loop ...), stored with the result
    settings: dict[str, Setting] = field(default_factory=dict)
    # blocks until a workflow's asynchronous outputs are ready, when they live outside torch's CUDA stream
    sync: Optional[Callable[[object], None]] = None


class Workflow:
    name: ClassVar[str]
    # top-level packages the workflow needs; checked (without importing) before any model is built
    requires: ClassVar[tuple[str, ...]] = ()

    def compile_module(self, module: "torch.nn.Module", inputs: tuple["torch.Tensor", ...],
                       ctx: WorkflowContext) -> Callable[..., object]:
        """A callable computing module(*inputs), prepared by this workflow. Its first call is timed as compile."""
        raise Unsupported(f"{self.name} does not run synthetic models")

    def prepare_llm(self, model: "torch.nn.Module", ctx: WorkflowContext) -> LLMRunner:
        raise Unsupported(f"{self.name} does not run LLMs yet")


def require(module: str, why: str = "") -> object:
    """Import a workflow's stack, turning its absence into Unsupported with a reason a user can act on."""
    import importlib

    try:
        return importlib.import_module(module)
    except Exception as error:  # ImportError, or a broken install raising anything on import
        detail = f" ({why})" if why else ""
        raise Unsupported(f"{module} not importable{detail}: {type(error).__name__}: {error}".splitlines()[0]) from None
