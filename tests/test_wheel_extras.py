"""The wheel as a plain `pip install mlcbench` makes it, without extras: only its base dependencies are there (linked
from this interpreter's, nothing else of it). A sweep in the local env is refused at once, naming the extra that
brings the worker's packages; a PostgreSQL store names the postgres extra; `mlcbench models` lists the models and
`mlcbench examples` writes the README's example suite with its configs, which then plans."""

import re
import subprocess
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

from mlcbench.orchestrator.errors import ExitCode
from tests.test_wheel import installed


def base_dependencies(into: Path) -> Path:
    """A folder holding (as links) the installed files of mlcbench's dependencies without extras, and theirs."""
    into.mkdir()
    todo, seen = ["mlcbench"], set()
    while todo:
        for text in metadata.distribution(todo.pop()).requires or []:
            requirement = Requirement(text)
            if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
                continue
            name = re.sub(r"[-_.]+", "-", requirement.name).lower()
            if name not in seen:
                seen.add(name)
                todo.append(name)
    for name in seen:
        distribution = metadata.distribution(name)
        for top in {file.parts[0] for file in distribution.files or [] if file.parts[0] not in ("..", "__pycache__")}:
            located = Path(distribution.locate_file(top))
            if located.exists() and not (into / top).exists():
                (into / top).symlink_to(located)
    assert not (into / "torch").exists() and not (into / "psycopg").exists()
    return into


def test_a_wheel_without_extras_names_them_and_ships_its_models_and_examples(tmp_path):
    venv, elsewhere, env = installed(tmp_path, base_dependencies(tmp_path / "dependencies"))
    mlcbench = str(venv / "bin" / "mlcbench")

    def run(*words: str) -> subprocess.CompletedProcess:
        return subprocess.run([mlcbench, *words], cwd=elsewhere, env=env, capture_output=True, text=True,
                              timeout=120)

    swept = run("sweep", "--model", "ffn-small", "--workflow", "eager", "--batch-size", "1")
    assert swept.returncode == ExitCode.ENVIRONMENT, swept.stdout + swept.stderr
    assert "has no torch" in swept.stderr and "pip install 'mlcbench[worker]'" in swept.stderr
    assert not (tmp_path / "store.db").exists()

    postgres = run("results", "--db", "postgresql+psycopg://user:secret@127.0.0.1:1/mlcbench")
    assert postgres.returncode == ExitCode.USAGE and "pip install 'mlcbench[postgres]'" in postgres.stderr
    assert "secret" not in postgres.stderr

    listed = run("models")
    assert listed.returncode == 0 and re.search(r"tinyllama-1\.1b\s+│ llm\s+│\s+1\.10B", listed.stdout), listed.stdout

    written = run("examples", "mine")
    assert written.returncode == 0, written.stderr
    assert (elsewhere / "mine" / "own-models.toml").is_file()
    assert (elsewhere / "mine" / "configs" / "llama3-tiny" / "config.json").is_file()
    planned = run("sweep", "--suite", "mine/own-models.toml", "--gpu", "cpu", "--plan")
    assert planned.returncode == 0 and "llama3-tiny" in planned.stdout, planned.stdout + planned.stderr
    with_own = run("models", "--suite", "mine/own-models.toml")
    assert re.search(r"qwen2-tiny\s+│ llm", with_own.stdout), with_own.stdout
