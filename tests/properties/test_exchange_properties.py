"""The exchange both ways: any Result the worker writes is read back by the host as exactly one equal Result, whatever
its text holds and wherever the host's read falls while the line is being written."""

from hypothesis import given
from hypothesis import strategies as st

from mlcbench.orchestrator.runtimes.follower import LineReader, parse_result_line
from mlcbench.schema import Metrics, Result
from mlcbench.workers.exchange import append_model
from tests.properties.test_schema_properties import PROPERTY_SETTINGS, jobs, statuses

# str.splitlines() ends a line at each of these; JSON escapes only \n, \r and the C0 controls inside a string
LINE_ENDS_OF_STR = ["\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
texts = st.text(st.characters(blacklist_categories=["Cs"]) | st.sampled_from(LINE_ENDS_OF_STR), max_size=60)
results = st.builds(
    lambda job, status, reason, error, log_tail, setting: Result.without_run(
        job, status, reason, error=error, log_tail=log_tail, metrics=Metrics(settings={"note": setting})),
    jobs, statuses, texts, st.none() | texts, st.none() | texts, texts)


@PROPERTY_SETTINGS
@given(st.lists(results, min_size=1, max_size=4), st.integers(min_value=0))
def test_every_result_the_worker_writes_is_read_back_by_the_host_as_one_equal_result(tmp_path, written, cut):
    worker_file, host_file = tmp_path / "worker.jsonl", tmp_path / "host.jsonl"
    worker_file.unlink(missing_ok=True)
    for result in written:
        append_model(worker_file, result)
    data = worker_file.read_bytes()
    cut %= len(data) + 1
    reader = LineReader(host_file)
    host_file.write_bytes(data[:cut])  # the host may read while a line is half written
    lines = reader.new_lines()
    host_file.write_bytes(data)
    lines += reader.new_lines()
    assert len(lines) == len(written)
    assert [parse_result_line(line, result.job) for line, result in zip(lines, written)] == written
