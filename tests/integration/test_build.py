"""The Python package: `python -m build` makes an sdist and a wheel (as the release workflow's dist job does) from a
copy of the source tree; the wheel holds every module and data file of gate/ (the schemas, the render assets), the
compiled gate.core._native (where a C compiler is), the console script and no tests; the sdist holds the C source and
setup.py; installed into a fresh virtualenv the wheel runs `rag-gate --help` and the quickstart."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
IGNORE = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".rag-gate", ".pytest_cache",
                                ".mypy_cache", ".ruff_cache", "node_modules", "tests", "bench", "examples",
                                "*.so")  # gate.core._native as the editable install built it in place: the build compiles its own
NATIVE_SOURCES = {"gate/core/_native.c", "gate/core/_ranked.c"}


def _shipped() -> set[str]:
    """Every file of the package in the working tree, as a wheel names it (but the C source, which the wheel holds
    compiled, and the module compiled in place)."""
    return {p.relative_to(ROOT).as_posix() for p in (ROOT / "gate").rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".so" and p.relative_to(ROOT).as_posix() not in NATIVE_SOURCES}


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if importlib.util.find_spec("build") is None:
        pytest.skip("the `build` package is not installed: pip install build")
    tmp = tmp_path_factory.mktemp("build")
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=IGNORE)  # build writes its egg-info into the source: not into the checkout
    out = tmp / "dist"
    proc = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(src)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


def _one(dist: Path, pattern: str) -> Path:
    (path,) = dist.glob(pattern)
    return path


def test_the_wheel_holds_the_package_its_data_and_the_console_script(dist: Path) -> None:
    wheel = _one(dist, "rag_gate-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    native = "gate/core/_native" + sysconfig.get_config_var("EXT_SUFFIX")
    if shutil.which("cc"):
        assert native in names and wheel.name.endswith(f"-{sysconfig.get_platform().replace('-', '_').replace('.', '_')}.whl")
    package = {n for n in names if not n.startswith("rag_gate-")} - {native}
    assert package == _shipped(), f"missing: {sorted(_shipped() - package)}; extra: {sorted(package - _shipped())}"
    for data in ("gate/config.schema.json", "gate/report.schema.json", "gate/render/assets/report.js", "gate/render/assets/report.css"):
        assert data in names
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    assert "rag-gate = gate.cli.main:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_the_sdist_holds_the_sources_the_wheel_is_built_from(dist: Path) -> None:
    sdist = _one(dist, "rag_gate-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {n.split("/", 1)[1] for n in archive.getnames() if "/" in n}
    assert {"pyproject.toml", "setup.py", "README.md", "LICENSE", *NATIVE_SOURCES} <= names
    assert _shipped() <= names and not any(n.startswith("tests/") for n in names)


def test_the_wheel_installed_in_a_fresh_venv_runs_the_quickstart(dist: Path, tmp_path: Path) -> None:
    """The wheel goes into a new virtualenv with pip (--no-deps, no index); its dependencies come from this
    environment's site-packages on PYTHONPATH, which holds no copy of gate (the checkout's is an editable finder that
    only a .pth file activates), so the `gate` imported is the wheel's."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    wheel = _one(dist, "rag_gate-*.whl")
    pip = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                         capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stderr
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_"))}
    env["PYTHONPATH"] = sysconfig.get_paths()["purelib"]
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import gate; print(gate.__file__)"], capture_output=True, text=True, env=env,
                           cwd=tmp_path)
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout + where.stderr
    if shutil.which("cc"):  # the wheel's compiled module is the one a run takes
        native = subprocess.run([str(venv / "bin" / "python"), "-c", "import gate.core._native as n; print(n.__file__)"],
                                capture_output=True, text=True, env=env, cwd=tmp_path)
        assert Path(native.stdout.strip()).is_relative_to(venv), native.stdout + native.stderr
    cli = str(venv / "bin" / "rag-gate")
    helped = subprocess.run([cli, "--help"], capture_output=True, text=True, env=env, timeout=60)
    assert helped.returncode == 0 and "run" in helped.stdout, helped.stderr
    ws = tmp_path / "quickstart"
    shutil.copytree(ROOT / "examples" / "quickstart", ws, ignore=shutil.ignore_patterns(".rag-gate", "__pycache__"))
    run = subprocess.run([cli, "run", "--config", "rag-eval.yml", "--report", "r.json", "--html", "r.html", "--no-progress", "-q"],
                         cwd=ws, capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert json.loads((ws / "r.json").read_text(encoding="utf-8"))["verdict"] == "pass"
    page = (ws / "r.html").read_text(encoding="utf-8")  # the render assets came from the wheel
    assert page.startswith("<!doctype html>") and "Content-Security-Policy" in page


def test_the_release_wheel_is_pure_python_and_still_carries_no_c_source(tmp_path: Path) -> None:
    """The release builds with RAG_GATE_NO_NATIVE=1 (.github/workflows/release.yml): a py3-none-any wheel, which a
    package index takes from any platform, without the compiled module."""
    if importlib.util.find_spec("build") is None:
        pytest.skip("the `build` package is not installed: pip install build")
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=IGNORE)
    out = tmp_path / "dist"
    env = {**os.environ, "RAG_GATE_NO_NATIVE": "1"}
    proc = subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(src)], capture_output=True, text=True,
                          timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    wheel = _one(out, "rag_gate-*-py3-none-any.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert not any(n.endswith((".so", ".pyd", ".c")) for n in names)
    assert {n for n in names if not n.startswith("rag_gate-")} == _shipped()
    assert "RAG_GATE_NO_NATIVE=1 python -m build" in (ROOT / ".github" / "workflows" / "release.yml").read_text(encoding="utf-8")
