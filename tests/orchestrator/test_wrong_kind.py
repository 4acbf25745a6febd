"""The catalog decides which model kinds a workflow runs: a wrong pair is stored `unsupported` with the catalog's
reason at planning, and never reaches a worker."""

import importlib.util

from mlcbench.orchestrator import sweep as sweeping
from mlcbench.orchestrator.gpu import Target
from mlcbench.orchestrator.runtimes.simulated import SimulatedRuntime, answer_ok
from mlcbench.orchestrator.store import Store
from mlcbench.schema import MODELS, WORKFLOWS, Suite, SuiteEntry

CPU = Target(tag="cpu", device="cpu", gpus=())
MODELS_OF_BOTH_KINDS = ["matmul-small", "llama-2layer"]


def sweep(tmp_path, *entries: SuiteEntry) -> tuple[sweeping.SweepReport, list[SimulatedRuntime], list[str]]:
    suite = Suite(name="pairs", description="model and workflow pairs", entries=list(entries))
    runtimes, answered = [], []

    def answer(job):
        answered.append(f"{job.workflow} {job.model}")
        return answer_ok(job)

    def runtime(env, _options, _gpu):
        runtimes.append(SimulatedRuntime(env, lambda job: 0.0, answer=answer))
        return runtimes[-1]

    options = sweeping.SweepOptions(suite=suite, env_names=["local"], target=CPU, workdir=tmp_path / "work")
    report = sweeping.run(options, Store(f"sqlite:///{tmp_path / 'store.db'}"), runtime_factory=runtime)
    return report, runtimes, answered


def test_wrong_kind_pairs_are_stored_with_the_catalogs_reason_and_never_reach_a_worker(tmp_path):
    workflows = list(WORKFLOWS)
    # a workflow built on another runs with one of its own options on (handtuned_decode: a kernel)
    built_on = [name for name in workflows if WORKFLOWS[name].builds_on]
    report, _, answered = sweep(
        tmp_path, SuiteEntry(models=MODELS_OF_BOTH_KINDS, workflows=[w for w in workflows if w not in built_on],
                             batch_sizes=[1]),
        *(SuiteEntry(models=MODELS_OF_BOTH_KINDS, workflows=[name], batch_sizes=[1],
                     options={WORKFLOWS[name].own_options()[0]: True}) for name in built_on))
    wrong = {(name, model) for name, info in WORKFLOWS.items() for model in MODELS_OF_BOTH_KINDS
             if MODELS[model].kind in info.why_not}
    assert wrong  # the catalog refuses some pairs
    # the local env's worker is this interpreter: a workflow whose packages it cannot find is refused at planning too
    missing = {(name, model) for name, info in WORKFLOWS.items() for model in MODELS_OF_BOTH_KINDS
               if any(importlib.util.find_spec(package) is None for package in info.requires)} - wrong
    refused = {(r.job.workflow, r.job.model): r for r in report.stored if r.status == "unsupported"}
    assert set(refused) == wrong | missing
    for (name, model), result in refused.items():
        expected = WORKFLOWS[name].why_not[MODELS[model].kind] if (name, model) in wrong else "not importable"
        assert expected in result.reason
    assert not any(f"{name} {model}" in answered for name, model in missing)
    # every other pair reached a worker (one answer per process of its cell)
    assert set(answered) == {f"{name} {model}" for name in workflows for model in MODELS_OF_BOTH_KINDS
                             if (name, model) not in wrong | missing}


def test_a_sweep_of_wrong_kind_pairs_only_starts_no_worker(tmp_path):
    report, runtimes, answered = sweep(
        tmp_path, SuiteEntry(models=["matmul-small"], workflows=["tensorrt_llm", "torch_compile_decode"], batch_sizes=[1]),
        SuiteEntry(models=["llama-2layer"], workflows=["aot_inductor"], batch_sizes=[1]))
    assert len(report.stored) == 3 and {r.status for r in report.stored} == {"unsupported"}
    assert answered == [] and sum(runtime.workers_started for runtime in runtimes) == 0
