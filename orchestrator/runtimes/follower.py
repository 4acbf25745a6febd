"""The crash-isolating follower of a worker, the same for every runtime: hand a worker a job file, follow its result
stream, and turn a worker that dies or overruns into a crashed / oom / timeout result for the job in flight, then
carry on with a fresh worker for the rest."""

import signal
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Optional

from pydantic import ValidationError

from mlcbench.orchestrator.runtimes.base import LOG_TAIL_CHARS, Runtime, StopRequest, WorkerFiles, WorkerHandle
from mlcbench.schema import Calibration, JobSpec, Result
from mlcbench.schema.protocol import complete_lines, encode_line


class LineReader:
    """Complete lines appended to a file since the last call (protocol.complete_lines)."""

    def __init__(self, path: Path):
        self._path = path
        self._offset = 0

    def new_lines(self) -> list[str]:
        try:
            with open(self._path, "rb") as handle:
                handle.seek(self._offset)
                data = handle.read()
        except FileNotFoundError:
            return []
        lines, consumed = complete_lines(data)
        self._offset += consumed
        return lines


def run_jobs(runtime: Runtime, jobs: list[JobSpec], workdir: Path, on_result: Callable[[Result], None],
             poll_s: Optional[float] = None, stop: Optional[StopRequest] = None,
             on_start: Callable[[JobSpec], None] = lambda job: None,
             on_calibration: Optional[Callable[[Calibration], None]] = None) -> None:
    """Run every job; exactly one Result per job reaches on_result, in job order; on_start hears of each job as its
    worker starts it. Once a stop is requested, the jobs not yet started get none (and, for a stop `now`, neither does
    the job in flight). With on_calibration, the first worker measures the device's ceilings before its first job,
    and they reach on_calibration."""
    stop = stop or StopRequest()
    pending = list(jobs)
    workdir = workdir.resolve()
    attempt = 0
    while pending and not stop.requested:
        files = WorkerFiles(workdir / f"worker-{attempt:03d}", calibrate=attempt == 0 and on_calibration is not None)
        files.folder.mkdir(parents=True, exist_ok=True)
        for stale in (files.results, files.progress, files.calibration):  # a folder reused by an earlier sweep: its answers are not ours
            stale.unlink(missing_ok=True)
        files.jobs.write_text("".join(map(encode_line, pending)), encoding="utf-8")
        handle = runtime.start_worker(files)
        try:
            done = _follow(handle, files, pending, on_result, poll_s or runtime.poll_s, stop, on_start)
        finally:
            if handle.poll() is None:
                handle.kill()
        if files.calibrate and on_calibration is not None and (lines := LineReader(files.calibration).new_lines()):
            try:
                on_calibration(Calibration.model_validate_json(lines[-1]))
            except ValidationError:  # a worker of another version: its figures are not ours to read
                pass
        pending = pending[done:]
        attempt += 1


def _follow(handle: WorkerHandle, files: WorkerFiles, jobs: list[JobSpec], on_result: Callable[[Result], None],
            poll_s: float, stop: StopRequest, on_start: Callable[[JobSpec], None]) -> int:
    """Follow one worker until it has answered every job, dies, overruns a job, or is asked to stop; returns how many
    jobs ended."""
    results, progress = LineReader(files.results), LineReader(files.progress)
    # started: jobs the worker has begun (progress lines); the job in flight is jobs[done] while started > done.
    # due_since: since when jobs[done] is due: the worker's start, then each result (a worker that hangs before it
    # starts a job times out like one that hangs inside it)
    done, started, due_since = 0, 0, time.monotonic()
    due_at = datetime.now(timezone.utc)  # the same moment on the wall clock: a lost job's result says when it ran

    def lost(result: Result) -> Result:
        return result.model_copy(update={"provenance": result.provenance.model_copy(update={
            "started_at": due_at, "ended_at": datetime.now(timezone.utc)})})

    while done < len(jobs):
        for line in results.new_lines():
            on_result(parse_result_line(line, jobs[done]))
            done += 1
            due_since, due_at = time.monotonic(), datetime.now(timezone.utc)
            if done == len(jobs) or stop.requested:
                return done
        for _ in progress.new_lines():
            if started < len(jobs):
                on_start(jobs[started])
            started += 1
        if stop.now.is_set() or (stop.after_job.is_set() and started <= done):
            return done
        exit_code = handle.poll()
        if exit_code is not None:
            for line in results.new_lines()[:len(jobs) - done]:  # lines written just before the end
                on_result(parse_result_line(line, jobs[done]))
                done += 1
            if done < len(jobs):
                on_result(lost(_died(jobs[done], exit_code, handle)))
                done += 1
            return done
        job = jobs[done]
        if time.monotonic() - due_since > job.timeout_s:
            handle.kill()
            where = "" if started > done else " (the worker never started it)"
            on_result(lost(Result.without_run(job, "timeout", f"no result within the job's {job.timeout_s:g} s "
                                              f"timeout{where}", log_tail=handle.log_tail())))
            return done + 1
        time.sleep(poll_s)
    return done


def parse_result_line(line: str, job: JobSpec) -> Result:
    """A worker's result line; one that does not parse, or answers another job, is kept as a failed result."""
    try:
        result = Result.model_validate_json(line)
    except ValidationError as error:
        return Result.without_run(job, "failed", f"worker wrote a result line that does not parse: "
                                  f"{error.errors()[0]['msg']}", error=line[:LOG_TAIL_CHARS])
    if result.job_id != job.job_id:
        return Result.without_run(job, "failed", f"worker answered job {result.job_id} while {job.job_id} was due",
                                  error=line[:LOG_TAIL_CHARS])
    return result


def _died(job: JobSpec, exit_code: int, handle: WorkerHandle) -> Result:
    if handle.oom_killed():
        return Result.without_run(job, "oom", "worker killed for memory (OOM)", exit_code=exit_code,
                                  log_tail=handle.log_tail())
    return Result.without_run(job, "crashed", f"worker died: {describe_exit(exit_code)}", exit_code=exit_code,
                              log_tail=handle.log_tail())


def describe_exit(code: int) -> str:
    """'exit code 3', 'killed by SIGSEGV' (negative codes from subprocess, 128+N from shells and containers)."""
    number = -code if code < 0 else code - 128 if code > 128 else None
    if number is not None:
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        hint = " (the kernel's OOM killer sends this too)" if name == "SIGKILL" else ""
        return f"killed by {name}{hint}, exit code {code}"
    return f"exit code {code}"
