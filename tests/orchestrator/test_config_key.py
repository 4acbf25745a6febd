"""A configuration mistake is not a permanent result: an `unsupported` result is final only under the configuration
that decided it (the env's files, the local env's installed packages)."""

from mlcbench.orchestrator import sweep as sweeping
from mlcbench.orchestrator.envs import ENVS_DIR_VARIABLE, config_key, load_env
from mlcbench.orchestrator.gpu import Target
from mlcbench.orchestrator.planner import Machine, plan_env
from mlcbench.orchestrator.runtimes.simulated import SimulatedRuntime
from mlcbench.orchestrator.store import Store
from mlcbench.orchestrator.suites import get_suite
from tests.orchestrator.stores import JOB, tagged

CPU = Target(tag="cpu", device="cpu", gpus=())
HERE = Machine("here", frozenset())


def write_env(root, workflows: str) -> None:
    (root / "mine").mkdir(exist_ok=True)
    (root / "mine" / "env.toml").write_text(f'runtime = "local"\nworkflows = {workflows}\n')


def sweep(tmp_path, store: Store) -> sweeping.SweepReport:
    options = sweeping.SweepOptions(suite=get_suite("tiny"), env_names=["mine"], target=CPU,
                                    filters=sweeping.Filters(models=["matmul-small"], workflows=["eager"],
                                                             batch_sizes=[1]),
                                    workdir=tmp_path / "work")
    return sweeping.run(options, store, runtime_factory=lambda env, _o, _g: SimulatedRuntime(env, lambda job: 0.0))


def test_an_env_toml_mistake_is_retried_once_it_is_fixed_and_not_before(tmp_path, monkeypatch):
    monkeypatch.setenv(ENVS_DIR_VARIABLE, str(tmp_path / "envs"))
    (tmp_path / "envs").mkdir()
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    write_env(tmp_path / "envs", '["torch_compile"]')  # eager forgotten
    assert [r.status for r in sweep(tmp_path, store).stored] == ["unsupported"]
    assert sweep(tmp_path, store).skipped == 1  # same configuration: the answer stands

    write_env(tmp_path / "envs", '["eager", "torch_compile"]')
    assert [r.status for r in sweep(tmp_path, store).stored] == ["ok"]
    [cell] = store.cells()
    assert cell.status == "ok" and cell.provenance.config_key == config_key(load_env("mine"))


def test_unsupported_is_final_only_under_the_configuration_that_decided_it():
    env = load_env("local")
    for stored_status, stored_key, current_key, runs in [
        ("unsupported", "a", "a", False), ("unsupported", "a", "b", True), ("unsupported", None, "b", True),
        ("ok", "a", "b", False), ("failed", "b", "b", True),
    ]:
        result = tagged(JOB, stored_status)
        done = {JOB.job_id: result.model_copy(update={"provenance": result.provenance.model_copy(
            update={"config_key": stored_key})})}
        plan = plan_env(env, [JOB], CPU, done, rerun=False, config_key=current_key, machine=HERE)
        assert (plan.to_run == [JOB]) is runs, (stored_status, stored_key, current_key)


def test_a_cell_whose_worker_died_of_a_fault_is_not_run_again_under_the_same_configuration_unless_asked():
    """A segfault is the code's answer to that job: a resume ran 32 aot_inductor cells again on four H200s, ≈ 45 s of
    GPU time each. A kill (the OOM killer's, a user's), a timeout or a failure is tried again; --rerun runs it all."""
    env = load_env("local")
    for status, exit_code, stored_key, rerun, runs in [
        ("crashed", -11, "a", False, False), ("crashed", -6, "a", False, False), ("crashed", -7, "a", False, False),
        ("crashed", -11, "a", True, True), ("crashed", -11, "b", False, True), ("crashed", -11, None, False, True),
        ("crashed", -9, "a", False, True), ("crashed", None, "a", False, True), ("timeout", None, "a", False, True),
        ("failed", 1, "a", False, True),
    ]:
        result = tagged(JOB, status, exit_code=exit_code)
        done = {JOB.job_id: result.model_copy(update={"provenance": result.provenance.model_copy(
            update={"config_key": stored_key})})}
        plan = plan_env(env, [JOB], CPU, done, rerun=rerun, config_key="a", machine=HERE)
        assert (plan.to_run == [JOB]) is runs, (status, exit_code, stored_key, rerun)
        assert plan.skipped == (0 if runs else 1)
