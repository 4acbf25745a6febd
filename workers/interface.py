"""The one interface every workflow implements, what it returns (Prepared, folded from its stack helpers' Fragments)
and what its LLM runners return: the bottom layer of the worker, which models, stacks, decode loops, workflows and
measurement all import (tests/test_architecture.py holds the order)."""

from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Generic, Iterator, Literal, Mapping, Optional, Protocol, TypeVar, cast

from mlcbench.schema import Applied, CacheCounts, JobSpec, Options
from mlcbench.schema.results import Setting

if TYPE_CHECKING:
    import torch


@dataclass
class Generation:
    # [batch, new tokens]: the token the loop itself chose at each step (fed to the next step unless forced_tokens
    # replaced it)
    tokens: "torch.Tensor"
    step_logits: Optional["torch.Tensor"] = None  # [batch, new tokens, vocab]: the logits each token was chosen from


# a Hugging Face causal LM (transformers' PreTrainedModel: not every image has transformers, and its configs' fields
# are per family)
CausalLM = Any


class LLMRunner(Protocol):
    """A loop that cannot be fed given tokens says why in a class attribute `no_teacher_forcing` (its check then
    compares free-running tokens); every other loop's check is teacher-forced."""

    def generate(self, input_ids: "torch.Tensor", max_new_tokens: int, with_logits: bool = False,
                 on_token: Optional[Callable[[], None]] = None,
                 forced_tokens: Optional["torch.Tensor"] = None) -> Generation:
        """Exactly max_new_tokens greedy tokens per row (EOS ignored); on_token is called as each step's token is ready.
        forced_tokens [batch, max_new_tokens]: step k+1 is fed forced_tokens[:, k] instead of the loop's own choice
        (teacher forcing: every step's logits follow the same prefix as the reference's); the loop's own choices are
        still what `tokens` returns."""


class Unsupported(Exception):
    """This workflow cannot run this job in this interpreter; the message is the reason shown to the user."""


class Unfit(ValueError):
    """The model is not one a decode loop or a kernel implements (workers/decode/static_llama.py,
    workers/kernels/): the message names its architecture and says why; the workflow makes it Unsupported."""


# a workflow's options class (WorkflowInfo.options)
OptionsT = TypeVar("OptionsT", bound=Options)


@dataclass(frozen=True)
class WorkflowContext(Generic[OptionsT]):
    """What a workflow is given: the job, where it runs, and its folder of the env's cache. What it did, it returns."""

    job: JobSpec
    device: "torch.device"
    dtype: "torch.dtype"
    cache_dir: Path

    @property
    def options(self) -> OptionsT:
        """The job's options as its workflow's own class (WorkflowInfo.options), which JobSpec validated them as:
        the one way a workflow reads them."""
        return cast(OptionsT, self.job.options)


def with_fields(applied: Applied, **fields: object) -> Applied:
    """`applied` with `fields` set (a field Applied does not have is an error); the fields it left unset stay unset."""
    return Applied.model_validate({**applied.model_dump(exclude_unset=True), **fields})


@dataclass(frozen=True)
class Fragment:
    """Part of what a workflow did, as a stack helper returns it beside its value: the Applied fields it set (only
    those set count) and provenance notes. The workflow folds its helpers' fragments into its Prepared."""

    applied: Applied = field(default_factory=Applied)
    notes: Mapping[str, Setting] = field(default_factory=dict)


Runs = TypeVar("Runs", covariant=True)


class CacheCounter(Protocol):
    """A compiler's own count of what a compile found in its on-disk caches, for a compiler whose counters dynamo does
    not keep (JAX's)."""

    def counts(self) -> CacheCounts:
        ...

    def state(self) -> Optional[Literal["cold", "warm"]]:
        """cold: something was compiled; warm: everything came from the caches; None: nothing was compiled."""


@dataclass
class Prepared(Generic[Runs]):
    """What compile_module and prepare_llm return: what runs, and what the workflow decided to get there."""

    # a callable computing module(*inputs) (synthetic models) or an LLMRunner (LLMs)
    runner: Runs
    # what the workflow decided (backend, decode loop, KV cache, accumulation ...): typed, read by the reports
    applied: Applied = field(default_factory=Applied)
    # blocks until the runner's asynchronous outputs are ready, when they live outside torch's CUDA stream
    sync: Optional[Callable[[object], None]] = None
    # free-form provenance stored beside `applied` (library versions, paths, the stack's own options), never read by
    # the reports; a runner handed this dict may add to it during its calls (XLA's compile counts)
    notes: dict[str, Setting] = field(default_factory=dict)
    # counting through the first call, read when the workflow's compiling block ends (None: dynamo's counters tell)
    cache_counter: Optional[CacheCounter] = None

    def fold(self, *fragments: Fragment) -> "Prepared[Runs]":
        """This Prepared with the fragments' Applied fields and notes added, in order (a later one replaces the same
        field or note). The notes dict stays the same object: a runner that holds it keeps writing into it."""
        for fragment in fragments:
            self.applied = with_fields(self.applied, **fragment.applied.model_dump(exclude_unset=True))
            self.notes.update(fragment.notes)
        return self


class Workflow(Generic[OptionsT]):
    """A workflow's code: the one subclass in mlcbench.workers.workflows.<name>, where <name> is its catalog row's,
    parametrised by its row's options class (`Workflow[TorchCompileOptions]`). It implements the method of each model
    kind the catalog says it runs; the catalog refuses the others."""

    @property
    def name(self) -> str:
        return type(self).__module__.rpartition(".")[2]

    def compile_module(self, module: "torch.nn.Module", inputs: tuple["torch.Tensor", ...],
                       ctx: WorkflowContext[OptionsT]) -> Prepared[Callable[..., object]]:
        """Synthetic models: a callable computing module(*inputs), prepared by this workflow, with what it applied.
        Its first call is timed as compile."""
        raise TypeError(f"the catalog says {self.name} runs synthetic models; its module has no compile_module")

    def prepare_llm(self, model: CausalLM, ctx: WorkflowContext[OptionsT]) -> Prepared[LLMRunner]:
        """LLMs: a runner of fixed-length greedy generation, prepared by this workflow, with what it applied."""
        raise TypeError(f"the catalog says {self.name} runs LLMs; its module has no prepare_llm")

    @contextmanager
    def compiling(self, ctx: WorkflowContext[OptionsT]) -> Iterator[tuple[str, ...]]:
        """Wraps preparation and the first call, where a JIT workflow compiles; its value names the on-disk caches
        those compiles use (Applied.compile_caches): none here."""
        yield ()


# a stored reason's most characters (Result.reason)
REASON_CHARS = 500


def error_reason(error: BaseException) -> str:
    """An exception as one line of a stored reason: its type and every line of its message (a message whose first line
    ends with ':' has its cause on the next ones), then the exceptions it was raised from."""
    parts = []
    cause: Optional[BaseException] = error
    while cause is not None:
        lines = [line.strip() for line in str(cause).splitlines() if line.strip()]
        parts.append(f"{type(cause).__name__}: {' / '.join(lines)}" if lines else type(cause).__name__)
        cause = cause.__cause__
    return "; raised from ".join(parts)[:REASON_CHARS]


def require(module: str, why: str = "") -> ModuleType:
    """Import a workflow's stack, turning its absence into Unsupported with a reason a user can act on."""
    import importlib

    try:
        return importlib.import_module(module)
    except Exception as error:  # ImportError, or a broken install raising anything on import
        detail = f" ({why})" if why else ""
        raise Unsupported(f"{module} not importable{detail}: {error_reason(error)}") from None
