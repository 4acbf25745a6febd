"""Every folder a worker's libraries write lies under its cache folder (workers/cache_environment.py): whether a
process compiles cold or warm depends on that folder alone, whatever the machine's temporary folder holds."""

from mlcbench.orchestrator.planner import stored_processes
from mlcbench.orchestrator.store import Store

SUITE = """name = "one-compile"
description = "one torch_compile cell, one process"
[[entries]]
models = ["ffn-small"]
workflows = ["torch_compile"]
batch_sizes = [1]
warmup = 0
repeats = 1
repetition = { processes = 1 }
"""


def test_a_first_process_with_a_fresh_cache_folder_is_cold_whatever_the_machines_tmp_holds(mlcbench, tmp_path,
                                                                                           monkeypatch):
    """Inductor's default cache is tempfile's folder/torchinductor_<user>, which every process of the machine shares:
    a first-ever process with a fresh --cache-dir was stored warm from what an earlier sweep (of any checkout) had
    left there. Here the earlier sweep used cache folder A and wrote nothing in the machine's temporary folder, a
    forked first process with folder B still compiles cold, and A's own next process is warm."""
    machine_tmp = tmp_path / "machine-tmp"
    machine_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(machine_tmp))
    for variable in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):  # the test session's, not a user's
        monkeypatch.delenv(variable)
    suite = tmp_path / "suite.toml"
    suite.write_text(SUITE)

    def sweep(cache: str, store: str, startup: str = "exec") -> list:
        db = f"sqlite:///{tmp_path / store}"
        done = mlcbench("sweep", "--suite", str(suite), "--env", "local", "--gpu", "cpu", "--startup", startup,
                        "--cache-dir", str(tmp_path / cache), "--db", db)
        assert done.returncode == 0, done.stdout + done.stderr
        (cell,) = Store(db, create=False).cells()
        assert cell.status == "ok", cell.error
        return [process.compile_cache for process in stored_processes(cell)]

    assert sweep("cache-a", "first.db") == ["cold"]
    assert sweep("cache-b", "fresh-forked.db", startup="fork") == ["cold"]
    assert sweep("cache-a", "again.db") == ["warm"]
    assert not list(machine_tmp.glob("torchinductor_*"))
