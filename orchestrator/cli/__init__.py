"""The `mlcbench` command."""

import importlib.util
import os
import shlex
import shutil
import sys
import tempfile
from collections import Counter
from enum import Enum
from importlib import metadata
from pathlib import Path
from typing import Annotated, Optional, get_args

import typer
from rich.markup import escape

from mlcbench.orchestrator import sweep as sweeping, workdirs
from mlcbench.orchestrator.cli.console import (DbOption, ProgressListener, console, exits_cleanly, split, statuses,
                                                warn_unreadable, workflows)
from mlcbench.orchestrator.cli.cluster import submit_sweep
from mlcbench.orchestrator.cli.plan import print_plan
from mlcbench.orchestrator.sweep.schedule import Estimator
from mlcbench.orchestrator.envs import load_env
from mlcbench.orchestrator.envs.images import connect
from mlcbench.orchestrator.errors import MEANINGS, EnvironmentFailure, ExitCode, UsageError
from mlcbench.orchestrator.gpu import CPU_TAG, Target, detect, resolve_target, tag_for
from mlcbench.orchestrator.planner import Filters
from mlcbench.orchestrator.runtimes.slurm import DEFAULT_TASKS_AT_ONCE, SbatchOptions, catalog_target, refuse_sqlite
from mlcbench.orchestrator.runtimes.base import StopRequest
from mlcbench.orchestrator.store import DEFAULT_DB, Store, provenance
from mlcbench.orchestrator.store.database import MACHINE_ERRNOS, sqlite_file
from mlcbench.orchestrator.store.redaction import mask, mask_url
from mlcbench.orchestrator.sweep import recovery
from mlcbench.orchestrator.suites import (builtin_names, default_suite, get_suite, grid_suite, suite_file,
                                           suite_text)
from mlcbench.orchestrator.reports.tables import history_table, results_table
from mlcbench.schema import FINAL_STATUSES, GPUS, MODELS, JobSpec, Status
from mlcbench.schema.protocol import DEFAULT_CACHE_DIR

# the statuses of jobs that did not end with an answer
FAILURES = tuple(status for status in get_args(Status) if status not in FINAL_STATUSES)

app = typer.Typer(help="Which ML-compiler workflow is fastest for your model on your GPU, at what compile cost, "
                       "and does it still give the right answer?", no_args_is_help=True, add_completion=False,
                  epilog="Exit codes of every command: " + "; ".join(f"{code.value} {meaning}"
                                                                     for code, meaning in MEANINGS.items()))

# parameters from which a model is warned of on a CPU (TinyLlama's 1.1B is; the smoke suite's llama-2layer is not)
LARGE_ON_A_CPU = 1_000_000_000
# attempts `results --history` lists unless --limit says
HISTORY_LIMIT = 50
SLURM_PANEL = "Slurm (--runtime slurm)"


def SlurmOption(help: str, *names: str):
    return Annotated[Optional[str], typer.Option(*names, help=help, rich_help_panel=SLURM_PANEL)]


class Runtime(str, Enum):
    local = "local"
    slurm = "slurm"


class WorkerScope(str, Enum):
    cell = "cell"
    round = "round"


class StartupPath(str, Enum):
    exec = "exec"
    fork = "fork"


def _checkpoints(values: Optional[list[str]]) -> dict[str, Path]:
    checkpoints = {}
    for value in values or []:
        model, separator, folder = value.partition("=")
        if not separator or not model or not folder:
            raise UsageError(f"--checkpoint {value!r}: expected MODEL=FOLDER, e.g. tinyllama-1.1b=/models/TinyLlama")
        if model in checkpoints:
            raise UsageError(f"--checkpoint {model}= given twice ({checkpoints[model]} and {folder}): one set of "
                             f"weights per model")
        checkpoints[model] = Path(folder).expanduser()
    return checkpoints


def _sbatch_args(values: Optional[list[str]]) -> tuple[str, ...]:
    """Each --sbatch-arg split as a shell would (two options in one value are two arguments to sbatch)."""
    words = []
    for value in values or []:
        try:
            words += shlex.split(value)
        except ValueError as error:
            raise UsageError(f"--sbatch-arg {value!r}: {error}") from None
    return tuple(words)


def _batch_sizes(values: Optional[list[str]]) -> list[int]:
    sizes = split(values, "--batch-size")
    if not all(size.isdigit() and int(size) > 0 for size in sizes):
        raise UsageError(f"--batch-size {','.join(values or [])!r}: expected positive whole numbers, e.g. 1,64")
    return [int(size) for size in sizes]


@app.command()
@exits_cleanly
def sweep(
    suite: Annotated[Optional[str], typer.Option(
        help="a built-in suite (paper, the default on a GPU; smoke on a CPU; `mlcbench suites` lists them) or a "
             "suite file, FILE.toml (`mlcbench suites --show paper` prints one to start from)")] = None,
    env: Annotated[Optional[list[str]], typer.Option(help="env name(s), comma-separated or repeated")] = None,
    gpu: Annotated[Optional[str], typer.Option(help="GPU tag: rtx4090, rtx5090, a100, h100, h200, l40s, l4, cpu")] = None,
    gpus: Annotated[Optional[str], typer.Option(
        help="GPUs to run on at once, one worker each: 'all' or indices '0,1' (default: the first GPU)")] = None,
    force_gpu_tag: Annotated[bool, typer.Option(help="tag results with --gpu even if the hardware differs")] = False,
    db: DbOption = DEFAULT_DB,
    rerun: Annotated[bool, typer.Option(help="run again jobs that already have a final result (one whose worker "
                                             "died of a segfault or another fault signal counts)")] = False,
    model: Annotated[Optional[list[str]], typer.Option(
        help="only these models of the suite; without --suite, a model not in the catalog (a folder with a "
             "config.json, or a model id in the local Hugging Face cache) or --input-len/--output-len make a grid "
             "of --model x --workflow x --batch-size of its own")] = None,
    workflow: Annotated[Optional[list[str]], typer.Option(help="only these workflows")] = None,
    batch_size: Annotated[Optional[list[str]], typer.Option(help="only these batch sizes (comma-separated or "
                                                                 "repeated)")] = None,
    input_len: Annotated[Optional[int], typer.Option(help="prompt tokens of a grid from the command line "
                                                          "(default 32)")] = None,
    output_len: Annotated[Optional[int], typer.Option(help="generated tokens of a grid from the command line "
                                                           "(default 32)")] = None,
    option: Annotated[Optional[list[str]], typer.Option(
        "--option", help="NAME=VALUE: an option every --workflow of a grid from the command line reads, e.g. "
                         "triton_gemv=true (repeatable; docs/workflows.md lists each workflow's)")] = None,
    workdir: Annotated[Optional[Path], typer.Option(
        help=f"job and result files of each worker (default: a folder of the store's own under {workdirs.ROOT}; "
             f"what a killed sweep left there is read back into that store only)")] = None,
    cache_dir: Annotated[Path, typer.Option(help="persistent compiler caches, per env")] = DEFAULT_CACHE_DIR,
    runtime: Annotated[Runtime, typer.Option(
        help="local: run here; slurm: submit as one Slurm job array (--db must be a server every node reaches, "
             "--workdir and this interpreter must be on a filesystem they share)")] = Runtime.local,
    partition: SlurmOption("Slurm partition") = None,
    gres: SlurmOption("generic resources per array task, e.g. gpu:1") = None,
    time_limit: SlurmOption("time limit per array task, e.g. 2:00:00", "--time") = None,
    cpus_per_task: Annotated[Optional[int], typer.Option(help="CPUs per array task", min=1,
                                                         rich_help_panel=SLURM_PANEL)] = None,
    array_parallelism: Annotated[Optional[int], typer.Option(
        help=f"array tasks running at once; the jobs are cut into tasks for that many (default "
             f"{DEFAULT_TASKS_AT_ONCE}, no limit)", min=1, rich_help_panel=SLURM_PANEL)] = None,
    sbatch_arg: Annotated[Optional[list[str]], typer.Option(
        help="any other sbatch option(s), split as a shell would: --sbatch-arg='--account=ml --qos=high' "
             "(repeatable)",
        rich_help_panel=SLURM_PANEL)] = None,
    checkpoint: Annotated[Optional[list[str]], typer.Option(
        help="MODEL=FOLDER: run that LLM with the weights of a local Hugging Face checkpoint folder")] = None,
    worker_scope: Annotated[WorkerScope, typer.Option(
        help="cell: a fresh worker process for every process of every cell; round: one worker process runs its "
             "share of a round's cells (fewer start-ups); stored with each result")] = WorkerScope.cell,
    startup: Annotated[StartupPath, typer.Option(
        help="exec: each worker a new interpreter; fork: forked, before CUDA is touched, from an interpreter that "
             "imported torch and the compilers once per round of a GPU's cells (local env; seconds less per "
             "process); stored with each result")] = StartupPath.exec,
    overlap: Annotated[int, typer.Option(
        min=1, max=8, help="worker processes at once on each GPU (local env): their compiles overlap on shares of the "
                           "host's cores, while each timed window has the GPU alone (the others stopped); as many "
                           "as the GPU's memory holds")] = 1,
    plan: Annotated[bool, typer.Option(
        "--plan", help="print the cells, processes per cell and the estimated time per GPU, and run or write "
                       "nothing")] = False,
    rounds: Annotated[Optional[int], typer.Option(
        min=1, help="stop after this many rounds (each cell one more process a round); the same command without it "
                    "resumes")] = None,
) -> None:
    """Run a suite in one or more envs and store every result. Ctrl-C (or SIGTERM) stops after the jobs in flight
    (twice: at once); running the same command again resumes. Exit codes: mlcbench --help."""
    provenance.git_revision()  # a revision given in the environment is checked before anything runs
    workdir = workdir or workdirs.for_store(recovery.store_identity(db))
    if runtime is Runtime.slurm:
        if gpu is None or gpus is not None:
            raise UsageError("--runtime slurm: name the nodes' GPU with --gpu TAG (cpu for CPU nodes) and ask Slurm "
                             "for GPUs with --gres gpu:N, not --gpus")
        target = catalog_target(gpu)
        refuse_sqlite(db)
    else:
        target = resolve_target(gpu, detect(), force_gpu_tag, gpus)
    models, workflows, batch_sizes = split(model, "--model"), split(workflow, "--workflow"), _batch_sizes(batch_size)
    given_options = _options(option)
    if _is_grid(suite, models, input_len, output_len, given_options):
        chosen = grid_suite(list(models), list(workflows), batch_sizes, input_len, output_len, given_options)
        filters = Filters()
    else:
        chosen = get_suite(suite or default_suite(target.device))
        filters = Filters(models=models, workflows=workflows, batch_sizes=batch_sizes)
    options = sweeping.SweepOptions(
        suite=chosen, env_names=list(split(env, "--env")) or ["local"], target=target, filters=filters,
        rerun=rerun, workdir=workdir, cache_dir=cache_dir, checkpoints=_checkpoints(checkpoint),
        worker_scope=worker_scope.value, startup=startup.value, max_rounds=rounds, overlap=overlap,
    )
    envs = [load_env(name) for name in options.env_names]
    if overlap > 1 and (runtime is not Runtime.local or any(spec.runtime != "local" for spec in envs)):
        raise UsageError("--overlap: workers that share a GPU stop one another while one times, which needs them "
                         "on this host's processes (the local runtime and local envs); drop --overlap here")
    jobs = sweeping.expand(options.suite, target, options.filters, options.checkpoints)  # fails before the store does
    refuse_models_larger_than_the_machine(jobs, target)
    gpu_only = gpu_only_options_on_a_cpu(jobs, target)
    if plan:
        if gpu_only:
            print(f"warning: {gpu_only}: a sweep on this machine refuses it", file=sys.stderr)
        print_plan(options, db)
        return
    if gpu_only:
        raise UsageError(gpu_only)
    warn_of_large_models_on_a_cpu(jobs, target)
    writable_folder(workdir, "--workdir")
    writable_folder(cache_dir, "--cache-dir")
    # what would fail every job is found out before a job runs or a row is stored
    if runtime is Runtime.local:
        refuse_a_local_worker_without_torch(envs)
        if any(spec.runtime == "docker" for spec in envs):
            connect()
        for spec in envs:
            usable_folder(cache_dir / spec.name, "--cache-dir")
    store = Store(db)
    store.check_writable()
    options.estimator = Estimator.from_results(store.cells(gpu_tag=target.tag))
    warn_of_other_stores_leftovers(workdir, store)
    console.print(f"suite [bold]{options.suite.name}[/] on [bold]{escape(hardware(target))}[/], "
                  f"env(s) {', '.join(options.env_names)}, store {escape(store.safe_url)}")
    if runtime is Runtime.slurm:
        sbatch = SbatchOptions(partition=partition, gres=gres, time=time_limit, cpus_per_task=cpus_per_task,
                              array_parallelism=array_parallelism, extra=_sbatch_args(sbatch_arg))
        submit_sweep(options, store, sbatch, force_gpu_tag)
        return
    stop = StopRequest()
    try:
        with ProgressListener() as listener, sweeping.stop_on_sigint(stop, on_first=listener.stopping):
            report = sweeping.run(options, store, listener, stop=stop)
    except KeyboardInterrupt:  # a second Ctrl-C: the closing line counts what this sweep stored, read back
        report = sweeping.SweepReport(stored=store.history(sweep_id=options.sweep_id), interrupted=True)
    except OSError as error:
        if error.errno not in MACHINE_ERRNOS:
            raise
        places = {"--workdir": workdir, "--cache-dir": cache_dir, "--db": sqlite_file(store.url)}
        raise EnvironmentFailure(machine_failure(error, {option: path for option, path in places.items() if path}))\
            from None
    workdirs.tidy(workdir, options.sweep_id, report.went_wrong)
    if report.stored:
        console.print(results_table(report.stored, title=f"sweep {options.suite.name} on {hardware(target)}"))
    console.print(closing_line(report, store, db), soft_wrap=True, highlight=False, markup=False)
    if report.interrupted or report.cells_short:
        resume = mask(shlex.join(["mlcbench", *map(_masked_word, sys.argv[1:])]), store.secrets)
        if report.interrupted:
            print(f"interrupted: every finished job is stored; to resume, run the same command again: {resume}",
                  file=sys.stderr)
            raise typer.Exit(ExitCode.INTERRUPTED)
        console.print(f"stopped after {rounds} round(s) (--rounds): {report.cells_short} cell(s) want more processes; "
                      f"to go on, run the same command again: {resume}", soft_wrap=True, highlight=False,
                      markup=False)
    if report.went_wrong:
        raise typer.Exit(ExitCode.JOBS_FAILED)


def _masked_word(word: str) -> str:
    """A word of the command line with a store URL's credentials masked (--db URL and --db=URL alike)."""
    name, equals, value = word.partition("=")
    return f"{name}={mask_url(value)}" if equals and word.startswith("--") else mask_url(word)


def _options(values: Optional[list[str]]) -> dict[str, str]:
    """Each --option NAME=VALUE; the values are checked, as a suite file's are, by the workflows' options classes."""
    options: dict[str, str] = {}
    for value in values or []:
        name, separator, setting = value.partition("=")
        if not separator or not name or not setting:
            raise UsageError(f"--option {value!r}: expected NAME=VALUE, e.g. triton_gemv=true")
        if name in options:
            raise UsageError(f"--option {name}= given twice ({options[name]} and {setting})")
        options[name] = setting
    return options


def _is_grid(suite: Optional[str], models: list[str], input_len: Optional[int], output_len: Optional[int],
             options: dict[str, str]) -> bool:
    """A grid from the command line: lengths or options given, or a model the catalog does not have; never beside
    --suite."""
    lengths = input_len is not None or output_len is not None
    if suite is not None:
        if lengths:
            raise UsageError("--input-len/--output-len make a grid of their own: set a suite's lengths in its file "
                             "(mlcbench suites --show NAME), or leave out --suite")
        if options:
            raise UsageError("--option makes a grid of its own: set a suite's options in its file "
                             "(mlcbench suites --show NAME), or leave out --suite")
        return False
    return lengths or bool(options) or any(name not in MODELS for name in models if Path(name).expanduser().exists() or "/" in name)


def warn_of_large_models_on_a_cpu(jobs: list[JobSpec], target: Target) -> None:
    """A CPU takes hours for a model of a billion parameters at batch 64 (the paper suite's LLMs): said before it
    starts, with how to pick fewer."""
    large = [job for job in jobs if job.model in MODELS and MODELS[job.model].parameter_count() >= LARGE_ON_A_CPU]
    if target.device != "cpu" or not large:
        return
    models = sorted({job.model for job in large})
    print(f"warning: on a CPU: {len(large)} job(s) of {', '.join(models)} (each of ≥ "
          f"{LARGE_ON_A_CPU / 1e9:g}B parameters), at batch up to {max(job.batch_size for job in large)}, may each "
          f"take hours; --model and --batch-size pick fewer, --suite smoke is sized for a CPU", file=sys.stderr)


def refuse_models_larger_than_the_machine(jobs: list[JobSpec], target: Target) -> None:
    """A UsageError, before a worker allocates anything, naming each model whose weights alone outgrow the memory
    they would be built in: the host's on a CPU, the GPU's where it is known (an absurd config, 10^6 layers, would
    otherwise allocate until the machine runs out)."""
    memory, where = machine_memory(target)
    if memory is None:
        return
    too_large = {}
    for job in jobs:
        weights = job.info.weight_bytes(job.precision)
        if weights is not None and weights > memory:
            too_large[job.model] = f"{job.model} ({job.info.parameter_count():,} parameters: {weights / 1e9:,.1f} GB " \
                                   f"at {job.precision})"
    if too_large:
        raise UsageError(f"the weights alone of {', '.join(too_large.values())} outgrow {where} "
                         f"({memory / 1e9:,.1f} GB): check the config's sizes, or run on a larger machine")


def gpu_only_options_on_a_cpu(jobs: list[JobSpec], target: Target) -> Optional[str]:
    """The first option that runs on a CUDA GPU only, turned on by a job of a sweep on a CPU, in words: a sweep
    refuses it rather than start a worker only to store it as unsupported (a plan warns of it). None when none is."""
    if target.device == "cuda":
        return None
    for job in jobs:
        on = [name for name in job.options.GPU_ONLY if getattr(job.options, name)]
        if on:
            return (f"{job.workflow} with {on[0]}=true runs on a CUDA GPU only, and this sweep runs on the "
                    f"{target.device}: leave {on[0]} out, or sweep on a GPU")
    return None


def refuse_a_local_worker_without_torch(envs: list) -> None:
    """The local env's worker runs in this interpreter: without torch every job would crash as its worker starts."""
    local = [spec.name for spec in envs if spec.runtime == "local"]
    if local and importlib.util.find_spec("torch") is None:
        raise EnvironmentFailure(f"the {', '.join(local)} env runs its worker in this interpreter ({sys.executable}), "
                                 f"which has no torch: install the worker's packages with pip install "
                                 f"'mlcbench[worker]', or sweep in a Docker env (--env cpu)")


def warn_of_other_stores_leftovers(workdir: Path, store: Store) -> None:
    """What killed sweeps into other stores left in this work folder stays there for those stores: said, not read."""
    for other, folders in recovery.left_for_other_stores(workdir, store).items():
        print(f"warning: --workdir {workdir} holds results of killed sweeps into another store ({other}: "
              f"{', '.join(folder.name for folder in folders)}); left for that store: a sweep into it with this "
              f"--workdir reads them back", file=sys.stderr)


def machine_memory(target: Target) -> tuple[Optional[int], str]:
    """The memory a job's model is built in, and what it is, in words: None where it is not known."""
    if target.device == "cpu":
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "this host's memory"
    known = [gpu.memory_total_bytes for gpu in target.gpus if gpu.memory_total_bytes]
    if known:
        return min(known), "the GPU's memory"
    peaks = GPUS.get(target.tag)
    return (int(peaks.memory_gb * 1e9), f"a {target.tag}'s memory") if peaks is not None else (None, "")


def hardware(target: Target) -> str:
    """What a sweep runs on, in words: the tag where it names the hardware, else the hardware and the forced tag."""
    found = tag_for(target.gpus[0]) if target.gpus else CPU_TAG
    if found == target.tag:
        return f"{target.tag} ({target.device})"
    where = f"{target.gpus[0].name}" if target.gpus else "this host's CPU"
    return f"{where}, results tagged {target.tag} (--force-gpu-tag)"


def writable_folder(path: Path, option: str) -> None:
    """A folder that exists or can be made, checked without making it (a refused command writes nothing)."""
    existing = path.absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"{option} {path}: {existing} is a file, not a folder; choose a folder")
    if not os.access(existing, os.W_OK):
        raise UsageError(f"{option} {path}: {existing} cannot be written; choose a folder you can write to")


def usable_folder(path: Path, option: str) -> None:
    """Made, as a run would make it, and written once: a folder that writable_folder lets through may still refuse (a
    pseudo or read-only filesystem, a full disk), which would make every job crash."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as error:
        reason = f"{option} {path.parent}: cannot be used ({error.strerror or error}: {error.filename or path})"
        if error.errno in MACHINE_ERRNOS:
            raise EnvironmentFailure(f"{reason}; free space, then run the same command again") from None
        raise UsageError(f"{reason}; choose a folder you can write to") from None


def machine_failure(error: OSError, places: dict[str, Path]) -> str:
    """A full disk or an I/O error while sweeping, said with the file where it is known and the space left where the
    sweep writes: the place to free is the one short of it."""
    file = f" writing {error.filename}" if error.filename else ""
    spaces = "; ".join(f"{option} {path}: {_free(path)} free" for option, path in places.items())
    return f"{error.strerror or error}{file} ({spaces}): free space where it is short, then run the same command again"


def _free(path: Path) -> str:
    existing = path.absolute()
    while not existing.exists():
        existing = existing.parent
    return f"{shutil.disk_usage(existing).free / 1e9:,.1f} GB"


def closing_line(report: sweeping.SweepReport, store: Store, db: str) -> str:
    """'N ok · M unsupported · K failed/crashed/oom/timeout · C failed check(s) · L lost process(es)', what was
    skipped, where it is, how to see what went wrong."""
    counts = Counter(result.status for result in report.stored)
    line = (f"{counts['ok']} ok · {counts['unsupported']} unsupported · {report.failed_jobs} {'/'.join(FAILURES)}"
            f" · {report.failed_checks} failed check(s) · {report.lost_processes} lost process(es)"
            + (f" · {report.skipped} skipped (already stored for this env and GPU; --rerun to run again)"
               if report.skipped else "")
            + (f" · {report.recovered} process result(s) of a killed sweep read back" if report.recovered else "")
            + f"; store {store.safe_url}")
    where = "" if db == DEFAULT_DB else f" --db {shlex.quote(store.safe_url)}"
    if report.failed_jobs:
        line += f"; see why: mlcbench results{where} --status {','.join(FAILURES)}"
    elif report.went_wrong:
        line += f"; see why (the reason column): mlcbench results{where}"
    return line


def version_callback(value: bool) -> None:
    if value:
        console.print(f"mlcbench {metadata.version('mlcbench')}")
        raise typer.Exit()


@app.callback()
def main(version: Annotated[Optional[bool], typer.Option("--version", callback=version_callback, is_eager=True,
                                                         help="print the version and exit")] = None) -> None:
    pass


@app.command()
@exits_cleanly
def results(
    db: DbOption = DEFAULT_DB,
    env: Annotated[Optional[list[str]], typer.Option(help="only these envs")] = None,
    gpu: Annotated[Optional[list[str]], typer.Option(help="only these GPU tags")] = None,
    model: Annotated[Optional[list[str]], typer.Option(help="only these models")] = None,
    workflow: Annotated[Optional[list[str]], typer.Option(help="only these workflows")] = None,
    status: Annotated[Optional[list[str]], typer.Option(help="only these statuses")] = None,
    history: Annotated[bool, typer.Option(help="attempts in the order they were stored, with when they ended and "
                                               "their sweep, not the result of each cell")] = False,
    limit: Annotated[int, typer.Option(help="--history: the latest N attempts (0: all)", min=0)] = HISTORY_LIMIT,
) -> None:
    """List the result of each cell (job, env, GPU): its latest ok attempt, else its latest final one, else its
    latest. --history lists the attempts stored last."""
    filters = dict(env=split(env, "--env") or None, gpu_tag=split(gpu, "--gpu") or None,
                   model=split(model, "--model") or None, workflow=workflows(workflow) or None,
                   status=statuses(status) or None)
    store = Store(db, create=False)
    shown = store.latest(limit or None, **filters) if history else store.cells(**filters)
    warn_unreadable(store)
    if not shown:
        console.print("no stored results match")
        return
    if not history:
        console.print(results_table(shown, title=f"{len(shown)} stored result(s)"))
        return
    console.print(history_table(shown, title=f"the latest {len(shown)} stored attempt(s)"))
    if len(shown) == limit:
        console.print(f"--limit {limit}: older attempts are not shown (--limit 0 for all)", highlight=False)


@app.command()
@exits_cleanly
def suites(show: Annotated[Optional[str], typer.Option(
        help="print this built-in suite's TOML file, to copy, edit and run with --suite FILE.toml (or a suite "
             "file's, once it is found valid)")] = None) -> None:
    """List the built-in suites, or print one (--show NAME or FILE.toml)."""
    if show is not None:
        text = suite_text(show, "--show")
        if suite_file(show) is not None:
            get_suite(show)  # a suite file's problems, named as --suite names them
        print(text, end="")
        return
    for name in builtin_names():
        console.print(f"[bold]{name}[/]: {get_suite(name).description}")


def _register_commands() -> None:
    """Commands that live in their own modules (env images, models and examples, reports, Slurm sweeps)."""
    from mlcbench.orchestrator.cli import cluster, envs, models, reports

    envs.register(app)
    models.register(app)
    reports.register(app)
    cluster.register(app)


_register_commands()
