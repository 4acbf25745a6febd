"""Compile beside timing on one device (`sweep --overlap`): several worker processes at once, their lifetimes
overlapping, each timed window alone (the others stopped), every window's edges stored; a cold compile measured that
way takes out the time it stood stopped. Through the real CLI, on the CPU, with the lanes' workers pinned apart."""

import threading
import time

from mlcbench.orchestrator.store import Store
from mlcbench.orchestrator.sweep import sharing
from mlcbench.schema import GpuInfo, JobSpec


def test_an_overlapped_sweep_keeps_every_timed_window_apart_while_processes_run_side_by_side(mlcbench, tmp_path):
    db = tmp_path / "overlap.db"
    done = mlcbench("sweep", "--env", "local", "--gpu", "cpu", "--suite", "smoke", "--model", "ffn-small",
                    "--workflow", "eager,torch_compile", "--overlap", "2", "--db", f"sqlite:///{db}",
                    "--workdir", str(tmp_path / "work"), "--cache-dir", str(tmp_path / "cache"))
    assert done.returncode == 0, done.stdout + done.stderr

    results = Store(f"sqlite:///{db}", create=False).cells()
    processes = sharing.processes_of(results)
    assert len(results) == 4 and all(result.status == "ok" for result in results)
    assert all(process.window is not None and process.stopped_s is not None for process in processes)
    assert sharing.overlapping_windows(processes) == []
    assert sharing.lifetimes_overlap(processes) >= 1
    busy = sharing.busy_s(processes)[None]
    lives = sum((process.ended_at - process.launched_at).total_seconds() for process in processes)
    assert busy < lives  # the union of lifetimes is shorter than their sum: they overlapped
    for result in results:
        (process,) = result.metrics.latency.processes
        assert process.launched_at < process.window.opened_at < process.window.closed_at <= process.ended_at
        assert process.compile_stopped_s is not None and process.compile_stopped_s <= process.stopped_s


def test_overlap_is_refused_where_workers_cannot_stop_one_another(mlcbench, tmp_path):
    done = mlcbench("sweep", "--env", "local", "--gpu", "cpu", "--suite", "smoke", "--overlap", "2",
                    "--runtime", "slurm", "--db", "postgresql://nowhere/db")
    assert done.returncode == 2
    assert "--overlap" in done.stderr


def test_lanes_of_one_gpu_start_workers_only_as_their_memory_fits():
    budget = sharing.MemoryBudget(GpuInfo(name="H100", memory_total_bytes=80 << 30))
    llama = JobSpec(model="llama2-7b", workflow="eager", precision="fp16", batch_size=1, device="cuda")
    tiny = JobSpec(model="ffn-small", workflow="eager", precision="fp32", batch_size=1, device="cuda")
    assert 2 * sharing.memory_estimate(llama) <= budget.capacity < 3 * sharing.memory_estimate(llama)
    running, most = [0], [0]
    lock = threading.Lock()

    def process(job: JobSpec) -> None:
        with budget.reserved(sharing.memory_estimate(job)):
            with lock:
                running[0] += 1
                most[0] = max(most[0], running[0])
            time.sleep(0.2)
            with lock:
                running[0] -= 1

    threads = [threading.Thread(target=process, args=(llama,)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most[0] == 2
    huge = sharing.MemoryBudget(GpuInfo(name="small", memory_total_bytes=8 << 30))
    with huge.reserved(sharing.memory_estimate(llama)):  # larger than the GPU: it runs, alone
        pass
    assert sharing.memory_estimate(tiny) < sharing.memory_estimate(llama)
