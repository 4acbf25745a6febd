"""A sweep resumed on another machine (a GPU host lent for one session, the store committed and carried to a fresh host
in the next): the compiler caches stayed with the first machine, so a cell none of whose stored processes ran on this
host is planned afresh, its first process cold again; a cell whose processes ran here goes on from them; an older
store's processes, which do not name their host, plan as before."""

import socket
from typing import Optional

from hypothesis import given, settings, strategies as st

from mlcbench.orchestrator import sweep as sweeping
from mlcbench.orchestrator.envs import load_env
from mlcbench.orchestrator.gpu import Target
from mlcbench.orchestrator.planner import Machine, processes_due, still_due
from mlcbench.orchestrator.store import Store
from mlcbench.orchestrator.sweep import schedule
from mlcbench.orchestrator.sweep.cells import CellAttempt
from mlcbench.schema import JobSpec, Metrics, ProcessTiming, Repetition, Result, Suite, SuiteEntry, Timing

HERE = socket.gethostname()
HOSTS = st.sampled_from([None, HERE, "lent-host-a", "lent-host-b"])
SUITE = Suite(name="compiling", description="one compiling cell", entries=[SuiteEntry(
    models=["ffn-small"], workflows=["torch_compile"], batch_sizes=[1], warmup=0, repeats=2,
    repetition=Repetition(processes=3))])
JOB = SUITE.expand("cpu")[0]


def _processes(hosts: list[Optional[str]], first: str = "cold") -> list[ProcessTiming]:
    """A compiling cell's processes on these hosts: the first compiled into an empty cache, the others found it."""
    return [ProcessTiming(samples_ms=[1.0, 1.0], compile_cache=first if index == 0 else "warm", host=host,
                          gpu_uuid=None if host is None else f"GPU-of-{host}") for index, host in enumerate(hosts)]


def _stored(hosts: list[Optional[str]]) -> Result:
    """The cell as a stopped sweep stored it, short of its processes."""
    timing = Timing(median_ms=1.0, p10_ms=1.0, p90_ms=1.0, mean_ms=1.0, cv=0.0, repeats=2 * len(hosts),
                    method="perf_counter", processes=_processes(hosts))
    return Result(job_id=JOB.job_id, job=JOB, status="ok", metrics=Metrics(latency=timing))


def _plan(hosts: list[Optional[str]], machine: Machine = Machine(HERE, frozenset({f"GPU-of-{HERE}"}))):
    return still_due(load_env("local"), [JOB], {JOB.job_id: _stored(hosts)}, "key", machine)


@settings(max_examples=50, deadline=None)
@given(st.lists(HOSTS, min_size=1, max_size=2))
def test_a_cell_compiles_again_where_none_of_its_processes_ran_on_this_host(hosts):
    plan = _plan(hosts)
    elsewhere = all(host not in (None, HERE) for host in hosts)
    assert plan.to_run == [JOB]
    assert plan.cold_first(JOB) == elsewhere
    # another machine's processes start a new attempt here (a cell never mixes hosts): the whole count is due
    assert plan.processes_due(JOB) == (3 if elsewhere else processes_due(JOB, _processes(hosts)))
    assert schedule.cold_processes(JOB, plan.cold_first(JOB)) == int(elsewhere)


def test_a_cell_resumed_on_another_host_plans_a_cold_process_and_one_resumed_here_does_not():
    assert _plan(["lent-host-a", "lent-host-a"]).cold_first(JOB)
    assert not _plan([HERE, HERE]).cold_first(JOB) and _plan([HERE, HERE]).processes_due(JOB) == 2
    # an older store's processes name no host: they plan as before, as run here
    assert not _plan([None, None]).cold_first(JOB) and _plan([None, None]).processes_due(JOB) == 2


def test_a_lent_machine_of_the_same_name_with_other_gpus_is_another_machine():
    assert _plan([HERE, HERE], Machine(HERE, frozenset({"GPU-of-the-next-lent-machine"}))).cold_first(JOB)
    assert not _plan([HERE], Machine(HERE, frozenset({f"GPU-of-{HERE}", "GPU-beside-it"}))).cold_first(JOB)


def test_the_sweep_estimates_a_cold_first_process_for_a_cell_its_processes_left_on_another_host(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    stored = _stored(["lent-host-a"])
    store.put(stored.model_copy(update={"provenance": stored.provenance.model_copy(
        update={"env": "local", "gpu_tag": "cpu", "hostname": "lent-host-a"})}))
    options = sweeping.SweepOptions(suite=SUITE, env_names=["local"], workdir=tmp_path / "work",
                                    target=Target(tag="cpu", device="cpu", gpus=()))
    [env_plan] = sweeping.plan(options, store)
    typical = schedule.Estimator()
    assert env_plan.cold_first(JOB)
    cells = {JOB.job_id: CellAttempt(JOB, "sweep", 0, "cell", None, env_plan.resumed.get(JOB.job_id))}
    estimate = sweeping.assign_lanes(cells, env_plan, typical, lanes=1)[JOB.job_id]
    assert estimate == typical.process_s(JOB, cold=True) + 3 * typical.process_s(JOB, cold=False)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["cold", "warm"]), max_size=12), st.lists(st.sampled_from(["cold", "warm"]),
                                                                         min_size=12, max_size=12))
def test_a_cell_gets_its_count_whatever_mix_of_cold_and_warm_processes_it_holds(stored, coming):
    """Each machine's first process is cold: a cell may hold cold processes of more than one, and still ends."""
    job = JobSpec(model="ffn-small", workflow="torch_compile", precision="fp32", batch_size=1, device="cpu",
                  warmup=0, repeats=1, repetition=Repetition(processes=6))
    processes = [ProcessTiming(samples_ms=[1.0], compile_cache=cache) for cache in stored]
    ran = 0
    while processes_due(job, processes):
        processes.append(ProcessTiming(samples_ms=[1.0], compile_cache=coming[ran]))
        ran += 1
    assert ran <= 2 * job.repetition.processes - 1
