"""The timing gate (workers/measurement/gate.py) with real processes: while one holds the GPU alone, the others make
no progress at all; windows never overlap; a process killed inside its window leaves no neighbour stopped once the
host resumes them (orchestrator/sweep/sharing.py)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from mlcbench.orchestrator.sweep.sharing import resume_stopped
from mlcbench.schema.protocol import GATE_LOCK, GATE_LOG, GATE_MEMBERS, TIMING_GATE_ENV
from mlcbench.workers.measurement.gate import Gate
from mlcbench.workers.measurement.timing import STORED_SAMPLES, time_calls

# each member: ticks (a timestamp a line) all its life, and three times holds the gate for WINDOW_S while it ticks on
MEMBER = """
import sys, time
from pathlib import Path
from mlcbench.workers.measurement.gate import Gate
gate, ticks = Gate.from_environment(), Path(sys.argv[1])
gate.join()
end = time.time() + float(sys.argv[2])
with open(ticks, "a") as out:
    windows = 0
    while time.time() < end:
        out.write(f"{time.time()}\\n"); out.flush()
        if windows < 3 and time.time() > end - 2.5 + windows * 0.5:
            with gate.exclusive(drain=False):
                stop = time.time() + 0.3
                while time.time() < stop:
                    out.write(f"{time.time()}\\n"); out.flush(); time.sleep(0.002)
            windows += 1
        time.sleep(0.002)
gate.leave()
"""


def _member(gate: Path, ticks: Path, life_s: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", MEMBER, str(ticks), str(life_s)],
                            env={**os.environ, TIMING_GATE_ENV: str(gate)}, start_new_session=True)


def test_no_member_makes_progress_while_another_holds_the_gate_and_no_two_windows_overlap(tmp_path):
    gate = tmp_path / "gate"
    members = [_member(gate, tmp_path / f"ticks-{index}", 4.0) for index in range(3)]
    assert all(member.wait(60) == 0 for member in members)

    windows = [json.loads(line) for line in (gate / GATE_LOG).read_text().splitlines()]
    assert len(windows) == 9
    ordered = sorted(windows, key=lambda window: window["opened"])
    assert all(earlier["closed"] <= later["opened"] for earlier, later in zip(ordered, ordered[1:]))
    ticks = {member.pid: [float(line) for line in (tmp_path / f"ticks-{index}").read_text().split()]
             for index, member in enumerate(members)}
    for window in windows:
        inside = {pid: [tick for tick in stamps if window["opened"] < tick < window["closed"]]
                  for pid, stamps in ticks.items()}
        assert len(inside[window["pid"]]) > 10  # the holder ran on
        assert all(not stamps for pid, stamps in inside.items() if pid != window["pid"])
    assert not list((gate / GATE_MEMBERS).iterdir())  # each left


def test_the_time_a_member_stood_stopped_is_the_other_members_windows_over_its_span(tmp_path):
    gate = Gate(tmp_path)
    (tmp_path / GATE_LOG).write_text("\n".join(json.dumps(window) for window in [
        {"pid": os.getpid(), "opened": 10.0, "closed": 20.0},  # its own: not stopped
        {"pid": os.getpid() + 1, "opened": 30.0, "closed": 34.0},
        {"pid": os.getpid() + 2, "opened": 38.0, "closed": 50.0},
    ]) + "\n")
    assert gate.stopped_s(0.0, 100.0) == 16.0
    assert gate.stopped_s(32.0, 40.0) == 4.0


def test_the_host_resumes_members_a_killed_holder_left_stopped_but_never_inside_a_live_window(tmp_path):
    gate = tmp_path / "gate"
    (gate / GATE_MEMBERS).mkdir(parents=True)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        (gate / GATE_MEMBERS / str(sleeper.pid)).write_text(str(sleeper.pid))
        time.sleep(0.5)  # past its interpreter's start
        os.killpg(sleeper.pid, signal.SIGSTOP)
        assert _wait_for_state(sleeper.pid, "T") == "T"
        with open(gate / GATE_LOCK, "a") as held:  # a live window: the host leaves the member stopped
            import fcntl

            fcntl.flock(held, fcntl.LOCK_EX)
            resume_stopped(gate)
            time.sleep(0.2)
            assert _state(sleeper.pid) == "T"
            fcntl.flock(held, fcntl.LOCK_UN)
        resume_stopped(gate)  # the holder is gone: resumed
        assert _wait_for_state(sleeper.pid, "S") == "S"
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_minimum_window_times_more_calls_than_asked_and_the_store_keeps_an_even_sample_of_them():
    begin = time.perf_counter()
    timing = time_calls(lambda: sum(range(50)), warmup=1, repeats=5, cuda=False, min_window_s=0.3)
    assert time.perf_counter() - begin >= 0.3
    (process,) = timing.processes
    assert timing.repeats == process.timed_calls > 5 * 100
    assert len(process.samples_ms) <= STORED_SAMPLES + 1 and len(process.samples_ms) >= STORED_SAMPLES // 2

    asked = time_calls(lambda: sum(range(50)), warmup=1, repeats=5, cuda=False)
    assert asked.repeats == asked.processes[0].timed_calls == 5 == len(asked.processes[0].samples_ms)


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _wait_for_state(pid: int, wanted: str) -> str:
    deadline = time.time() + 10
    while _state(pid) != wanted and time.time() < deadline:
        time.sleep(0.05)
    return _state(pid)
