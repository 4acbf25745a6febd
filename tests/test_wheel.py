"""The package as `pip install .` makes it, not editable: a wheel built from the tree, installed into a fresh venv
outside it, runs `mlcbench envs` and a one-cell CPU sweep from another folder with nothing of the tree at hand (the
env definitions ship inside it). The venv sees this interpreter's installed dependencies (torch, pydantic ...) through a
path file rather than installing them again; that file adds a folder only, so the tree's editable install of mlcbench
stays out of it."""

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# what the wheel is built from: pyproject.toml's packages, their package data and its readme
SOURCES = ("pyproject.toml", "README.md", "schema", "workers", "orchestrator", "envs", "benchmarks/suites")


def _run(*args: object, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run([str(arg) for arg in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def installed(tmp_path: Path, dependencies: Path) -> tuple[Path, Path, dict[str, str]]:
    """The wheel built from the tree, installed into a fresh venv that sees the packages of `dependencies` (a
    site-packages folder); its venv, a folder outside the tree to run it from, and the environment to run it with."""
    source = tmp_path / "source"
    source.mkdir()
    for name in SOURCES:
        copy = shutil.copytree if (REPO / name).is_dir() else shutil.copyfile
        copy(REPO / name, source / name, **({"ignore": shutil.ignore_patterns("__pycache__")}
                                              if (REPO / name).is_dir() else {}))
    _run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", source, "-w",
         tmp_path / "dist", cwd=tmp_path)
    (wheel,) = (tmp_path / "dist").glob("mlcbench-*.whl")
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    site = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                     cwd=tmp_path).stdout.strip())
    (site / "dependencies.pth").write_text(f"{dependencies}\n")
    _run(sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", wheel, cwd=tmp_path)

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {name: value for name, value in os.environ.items()
           if name not in ("MLCBENCH_ENVS_DIR", "PYTHONPATH", "VIRTUAL_ENV")}
    env.update(MLCBENCH_DB=f"sqlite:///{tmp_path / 'store.db'}", MLCBENCH_CACHE_DIR=str(tmp_path / "cache"))
    return venv, elsewhere, env


def test_a_wheel_installed_outside_the_tree_lists_its_envs_and_runs_a_cpu_sweep(tmp_path):
    venv, elsewhere, env = installed(tmp_path, Path(sysconfig.get_paths()["purelib"]))
    python = venv / "bin" / "python"
    where = _run(python, "-c", "import mlcbench.orchestrator as o; print(o.__file__)", cwd=elsewhere, env=env)
    assert Path(where.stdout.strip()).is_relative_to(venv)
    mlcbench = venv / "bin" / "mlcbench"
    listed = _run(mlcbench, "envs", cwd=elsewhere, env=env)
    assert "local" in listed.stdout and "cpu" in listed.stdout
    swept = _run(mlcbench, "sweep", "--model", "ffn-small", "--workflow", "eager", "--batch-size", "1", "--rounds",
                 "1", cwd=elsewhere, env=env)
    assert "1 ok · 0 unsupported" in swept.stdout
