"""Output paths (export --out, report --markdown FILE, report --html DIR): written through a symlink to its target,
to a regular file or stdout (-); a FIFO, a device, a folder where a file is wanted or a file where a folder is wanted
is refused before any work (exit 2, naming the user's path)."""

import os
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mlcbench.orchestrator.cli import app
from mlcbench.orchestrator.errors import ExitCode
from tests.orchestrator.test_hostile_cli import one_error_line, store_of

runner = CliRunner()
# each option with what it writes: a file, or a folder with index.html in it
FILE_OPTIONS = [["export", "--out"], ["export", "--format", "json", "--out"], ["report", "--markdown"]]


@pytest.mark.parametrize("command", FILE_OPTIONS)
def test_a_symlink_is_written_through_to_its_target(tmp_path, command):
    _, url = store_of(tmp_path)
    target = tmp_path / "elsewhere" / "real.txt"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    done = runner.invoke(app, [*command, str(link), "--db", url])
    assert done.exit_code == 0, done.output
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() != "old" and "matmul-small" in target.read_text()


def test_an_html_folder_given_as_a_symlink_is_written_through(tmp_path):
    _, url = store_of(tmp_path)
    folder = tmp_path / "real-html"
    folder.mkdir()
    link = tmp_path / "html"
    link.symlink_to(folder)
    assert runner.invoke(app, ["report", "--html", str(link), "--db", url]).exit_code == 0
    assert link.is_symlink() and (folder / "index.html").is_file()


@pytest.mark.parametrize("command", FILE_OPTIONS)
def test_a_fifo_is_refused_before_any_work(tmp_path, command):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    # the store does not exist: the output is checked first, so its error is the one shown
    done = runner.invoke(app, [*command, str(fifo), "--db", f"sqlite:///{tmp_path / 'none.db'}"])
    one_error_line(done, ExitCode.USAGE, f"{command[-1]} {fifo}: {fifo} is a FIFO (named pipe), not a regular file")
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


@pytest.fixture
def device(tmp_path) -> Path:
    """A character device of its own (/dev/full's numbers): the code this fixes replaced the node it was given with a
    regular file, which must not happen to the machine's /dev/full."""
    path = tmp_path / "full"
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    except PermissionError:
        pytest.skip("making a device node needs root")
    return path


@pytest.mark.parametrize("command", FILE_OPTIONS)
def test_a_device_is_refused(tmp_path, device, command):
    _, url = store_of(tmp_path)
    done = runner.invoke(app, [*command, str(device), "--db", url])
    one_error_line(done, ExitCode.USAGE, f"{command[-1]} {device}: {device} is a device, not a regular file")
    assert stat.S_ISCHR(device.lstat().st_mode)


def test_a_symlink_to_a_device_is_refused_naming_both(tmp_path, device):
    _, url = store_of(tmp_path)
    link = tmp_path / "out.csv"
    link.symlink_to(device)
    one_error_line(runner.invoke(app, ["export", "--out", str(link), "--db", url]), ExitCode.USAGE,
                   f"--out {link}: {link} (-> {device}) is a device")
    assert link.is_symlink() and stat.S_ISCHR(device.lstat().st_mode)


@pytest.mark.parametrize("command", FILE_OPTIONS)
def test_a_folder_where_a_file_is_wanted_is_refused_before_any_work(tmp_path, command):
    folder = tmp_path / "a-folder"
    folder.mkdir()
    done = runner.invoke(app, [*command, str(folder), "--db", f"sqlite:///{tmp_path / 'none.db'}"])
    one_error_line(done, ExitCode.USAGE, f"{command[-1]} {folder}: {folder} is a folder, not a regular file")
    assert "free space" not in done.stderr and ".tmp" not in done.stderr
    assert list(folder.iterdir()) == []


def test_a_file_where_the_html_folder_is_wanted_is_refused_before_any_work(tmp_path):
    path, url = store_of(tmp_path)
    report_file = tmp_path / "report.html"
    report_file.write_text("mine")
    done = runner.invoke(app, ["report", "--html", str(report_file), "--db", url])
    one_error_line(done, ExitCode.USAGE, f"--html {report_file}: {report_file} is a regular file, not a folder")
    assert done.stdout == ""  # refused before the report was printed
    assert report_file.read_text() == "mine"


@pytest.mark.parametrize("command", [*FILE_OPTIONS, ["report", "--html"]])
def test_a_file_where_a_parent_folder_is_wanted_is_refused(tmp_path, command):
    path, url = store_of(tmp_path)
    done = runner.invoke(app, [*command, str(path / "sub" / "out"), "--db", url])
    one_error_line(done, ExitCode.USAGE, f"{command[-1]} {path / 'sub' / 'out'}: {path} is a regular file, not a folder")


def test_a_dash_writes_to_stdout(tmp_path):
    _, url = store_of(tmp_path)
    done = runner.invoke(app, ["export", "--out", "-", "--db", url])
    assert done.exit_code == 0 and done.stdout.startswith("gpu,env,model")
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize("through_a_link", [False, True])
@pytest.mark.parametrize("command", FILE_OPTIONS)
def test_the_store_itself_as_the_output_is_refused_and_left_whole(tmp_path, command, through_a_link):
    path, url = store_of(tmp_path)
    before = path.read_bytes()
    output = path
    if through_a_link:
        output = tmp_path / "out.csv"
        output.symlink_to(path)
    done = runner.invoke(app, [*command, str(output), "--db", url])
    one_error_line(done, ExitCode.USAGE, f"{command[-1]} {output}: ")
    assert "which this command reads" in done.stderr and done.stdout == ""
    assert path.read_bytes() == before


def test_a_store_named_index_html_in_the_html_folder_is_refused(tmp_path):
    _, url = store_of(tmp_path)
    folder = tmp_path / "html"
    folder.mkdir()
    store = folder / "index.html"
    (tmp_path / "store.db").rename(store)
    before = store.read_bytes()
    done = runner.invoke(app, ["report", "--html", str(folder), "--db", f"sqlite:///{store}"])
    one_error_line(done, ExitCode.USAGE, "which this command reads")
    assert store.read_bytes() == before
