"""The architecture, enforced: the pure core imports no edge, the run package sits between the stages and the
commands, no module of gate/ takes part in an import cycle, and modules and functions stay small.

The rules, read from the source with ``ast`` (every import counts: module level, inside functions, under
TYPE_CHECKING; and a module depends on the package it lives in, whose ``__init__`` runs first):

* ``gate.core`` imports only ``gate.core`` and the standard library, and none of the standard library that does
  I/O or reads the world (os, sys, time, socket, subprocess, threading, asyncio, pathlib, tempfile, logging,
  sqlite3, urllib.request, http.client, shutil, io...); it never calls open(), print(), input(), nor a clock (``.now()``,
  ``.utcnow()``, ``.today()``, ``time()``).
* ``gate.render`` (reports rendered to strings) follows the same rules, and may import ``gate.core``.
* ``gate.run`` (one run: load, ask, measure, evaluate, shards, merge, plan) imports only the layers below it:
  ``gate.core``, ``gate.config``, ``gate.io``, ``gate.judges``, ``gate.stages``, ``gate.targets``, ``gate.deadline``
  and the package's version; none of those imports ``gate.run``. The command line, the application and the GitHub
  edge are above it.
* No import cycle among the modules of ``gate``.
* No module of ``gate`` over 400 lines (the report's type declarations excepted), no function over 60 lines, none
  with more than 6 parameters (``self`` and ``cls`` not counted); the exceptions are listed by name with the reason.

The tests at the bottom run the checker on small made-up packages, to show that it does catch each kind of breach.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PURE = {"gate.core": ("gate.core",), "gate.render": ("gate.core", "gate.render")}
RUN = "gate.run"
RUN_MAY_IMPORT = ("gate", "gate.core", "gate.config", "gate.io", "gate.judges", "gate.stages", "gate.targets", "gate.deadline", RUN)
BELOW_RUN = ("gate.core", "gate.config", "gate.io", "gate.judges", "gate.stages", "gate.targets", "gate.render", "gate.deadline")
MAX_MODULE_LINES, MAX_FUNCTION_LINES, MAX_PARAMETERS = 400, 60, 6
LONG_MODULES = {"gate/core/report.py": "the report's type declarations: one TypedDict per shape report.schema.json holds"}
LONG_FUNCTIONS: dict[str, str] = {}  # "path:function" -> why it may be longer
MANY_PARAMETERS: dict[str, str] = {}  # "path:function" -> why it may take more
FORBIDDEN_STDLIB = {"os", "sys", "time", "socket", "subprocess", "threading", "asyncio", "pathlib", "tempfile", "logging",
                    "sqlite3", "urllib.request", "http.client", "http.server", "shutil", "io", "multiprocessing", "concurrent",
                    "select", "signal", "ssl", "socketserver", "smtplib", "ftplib", "webbrowser"}
FORBIDDEN_CALLS = {"open", "print", "input"}
CLOCK_ATTRIBUTES = {"now", "utcnow", "today", "time", "time_ns", "perf_counter", "monotonic"}


@dataclass(frozen=True)
class Import:
    target: str  # the module imported (the deepest one that exists as a file, for a gate module)
    line: int


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` under ``root``: dotted name -> file."""
    return {module_name(p, root): p for p in sorted((root / package).rglob("*.py"))}


def _resolve(name: str, known: dict[str, Path]) -> str:
    """``a.b.c`` -> the deepest of ``a.b.c``, ``a.b``, ``a`` that is a module of the package (else the name itself)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        candidate = ".".join(parts[:i])
        if candidate in known:
            return candidate
    return name


def imports_of(path: Path, name: str, known: dict[str, Path]) -> list[Import]:
    """The modules ``name`` imports anywhere in its source, plus the package it lives in."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    out: list[Import] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [Import(_resolve(a.name, known), node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package this module is in
                anchor = name.split(".")
                anchor = anchor if is_package else anchor[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for a in node.names:
                full = f"{base}.{a.name}"
                out.append(Import(_resolve(full if full in known else base, known), node.lineno))
    parent = name.rsplit(".", 1)[0] if "." in name else None
    if parent and parent != name and not (is_package and parent == name):
        out.append(Import(parent, 0))
    return out


def graph(root: Path, package: str) -> dict[str, list[Import]]:
    known = modules(root, package)
    return {name: [i for i in imports_of(path, name, known) if i.target != name] for name, path in known.items()}


def purity_violations(root: Path, package: str) -> list[str]:
    """Each breach of the pure-layer rules, as 'module:line: what'."""
    known = modules(root, package)
    out: list[str] = []
    for name, path in known.items():
        layer = next((p for p in PURE if name == p or name.startswith(p + ".")), None)
        if layer is None:
            continue
        allowed = PURE[layer]
        for imp in imports_of(path, name, known):
            top = imp.target.split(".")[0]
            if imp.line == 0:
                continue  # the package a module lives in
            if top == package:
                if not any(imp.target == a or imp.target.startswith(a + ".") for a in allowed):
                    out.append(f"{name}:{imp.line}: imports {imp.target} (a {layer} module may import only {', '.join(allowed)})")
            elif any(imp.target == f or imp.target.startswith(f + ".") for f in FORBIDDEN_STDLIB):
                out.append(f"{name}:{imp.line}: imports {imp.target} (I/O, environment or clock)")
            elif top not in sys.stdlib_module_names:
                out.append(f"{name}:{imp.line}: imports {imp.target} (a third-party package)")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            if isinstance(f, ast.Name) and f.id in FORBIDDEN_CALLS:
                out.append(f"{name}:{node.lineno}: calls {f.id}()")
            elif isinstance(f, ast.Attribute) and f.attr in CLOCK_ATTRIBUTES:
                out.append(f"{name}:{node.lineno}: calls .{f.attr}() (reads the clock)")
    return out


def cycles(g: dict[str, list[Import]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each as a sorted list of names."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for imp in g.get(v, []):
            w = imp.target
            if w not in g:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(g):
        if v not in index:
            visit(v)
    return found


def _within(name: str, packages: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def run_package_violations(root: Path, package: str) -> list[str]:
    """Each import that breaks the run package's place: gate.run importing above itself (the command line, the
    application, the GitHub edge, the renderers), or a layer below importing gate.run."""
    known = modules(root, package)
    out: list[str] = []
    for name, path in known.items():
        for imp in imports_of(path, name, known):
            if imp.line == 0 or not imp.target.startswith(package):
                continue
            if _within(name, (RUN,)) and not (imp.target == package or _within(imp.target, RUN_MAY_IMPORT[1:])):
                out.append(f"{name}:{imp.line}: imports {imp.target} (the run package may import only {', '.join(RUN_MAY_IMPORT[1:])})")
            elif _within(name, BELOW_RUN) and _within(imp.target, (RUN,)):
                out.append(f"{name}:{imp.line}: imports {imp.target} (a layer below the run package)")
    return out


@dataclass(frozen=True)
class Function:
    where: str  # "gate/path.py:name"
    lines: int
    parameters: int


def functions(root: Path, package: str) -> list[Function]:
    """Every function and method of the package, with its length in lines and its parameters (self, cls not counted;
    *args and **kwargs count one each)."""
    out = []
    for path in sorted((root / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                named = [x for x in [*a.posonlyargs, *a.args, *a.kwonlyargs] if x.arg not in ("self", "cls")]
                count = len(named) + (a.vararg is not None) + (a.kwarg is not None)
                out.append(Function(f"{path.relative_to(root).as_posix()}:{node.name}", node.end_lineno - node.lineno + 1, count))
    return out


def size_violations(root: Path, package: str) -> list[str]:
    """Modules, functions and parameter lists over the limits, less the exceptions named above."""
    out = []
    for path in sorted((root / package).rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > MAX_MODULE_LINES and rel not in LONG_MODULES:
            out.append(f"{rel}: {n} lines (at most {MAX_MODULE_LINES}): split it")
    for f in functions(root, package):
        if f.lines > MAX_FUNCTION_LINES and f.where not in LONG_FUNCTIONS:
            out.append(f"{f.where}: {f.lines} lines (at most {MAX_FUNCTION_LINES})")
        if f.parameters > MAX_PARAMETERS and f.where not in MANY_PARAMETERS:
            out.append(f"{f.where}: {f.parameters} parameters (at most {MAX_PARAMETERS}): bundle what travels together")
    return out


# --------------------------------------------------------------------------- the rules, on gate/


def test_pure_layers_import_no_edge():
    assert purity_violations(ROOT, "gate") == []


def test_no_module_of_gate_takes_part_in_an_import_cycle():
    assert cycles(graph(ROOT, "gate")) == []


def test_the_run_package_sits_between_the_stages_and_the_commands():
    assert run_package_violations(ROOT, "gate") == []


def test_modules_functions_and_parameter_lists_stay_small():
    assert size_violations(ROOT, "gate") == []


def test_the_size_exceptions_still_name_something_that_needs_them():
    """An exception that is no longer needed (the function was split, the module shrank) is struck from the list."""
    sized = {f.where: f for f in functions(ROOT, "gate")}
    for where in LONG_FUNCTIONS:
        assert where in sized and sized[where].lines > MAX_FUNCTION_LINES, where
    for where in MANY_PARAMETERS:
        assert where in sized and sized[where].parameters > MAX_PARAMETERS, where
    for rel in LONG_MODULES:
        assert len((ROOT / rel).read_text(encoding="utf-8").splitlines()) > MAX_MODULE_LINES, rel


def test_the_layers_exist_and_are_checked():
    names = set(modules(ROOT, "gate"))
    for layer in ("gate.core", "gate.render", "gate.stages", "gate.config", "gate.io", "gate.github", "gate.judges", "gate.targets",
                  "gate.run", "gate.cli"):
        assert layer in names, layer
    assert len([n for n in names if n.startswith("gate.core.")]) >= 10


# --------------------------------------------------------------------------- the checker catches each breach


def make_package(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for folder in {p for rel in files for p in (root / rel).parents if p != root and root in p.parents}:
        (folder / "__init__.py").touch()
    return root


@pytest.mark.parametrize(
    ("source", "said"),
    [
        ("import requests\n", "imports requests (a third-party package)"),
        ("import os\nX = os.environ.get('A')\n", "imports os (I/O, environment or clock)"),
        ("from os import environ\n", "imports os (I/O, environment or clock)"),
        ("import time\n", "imports time (I/O, environment or clock)"),
        ("from urllib.request import urlopen\n", "imports urllib.request (I/O, environment or clock)"),
        ("def f():\n    from gate.stages import retrieval\n", "imports gate.stages.retrieval (a gate.core module may import only gate.core)"),
        ("from gate.github.client import GitHubClient\n", "imports gate.github.client"),
        ("from datetime import datetime\nT = datetime.now()\n", "calls .now() (reads the clock)"),
        ("def f(p):\n    return open(p).read()\n", "calls open()"),
        ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from gate.io import files\n", "imports gate.io.files"),
    ],
)
def test_checker_flags_a_core_module_that_reaches_an_edge(tmp_path, source, said):
    root = make_package(tmp_path, {
        "gate/core/bad.py": source,
        "gate/core/fine.py": "import math\nimport json\nfrom gate.core import bad\n",
        "gate/stages/retrieval.py": "", "gate/github/client.py": "class GitHubClient: ...\n", "gate/io/files.py": "",
    })
    found = purity_violations(root, "gate")
    assert any(v.startswith("gate.core.bad:") and said in v for v in found), found
    assert not any(v.startswith("gate.core.fine:") for v in found), found


def test_checker_accepts_a_clean_core(tmp_path):
    root = make_package(tmp_path, {
        "gate/core/a.py": "import math\nfrom collections.abc import Mapping\nfrom gate.core.b import B\n",
        "gate/core/b.py": "from dataclasses import dataclass\nB = 1\n",
        "gate/render/r.py": "from gate.core.a import math\nimport html\n",
        "gate/stages/s.py": "import requests\nimport os\nfrom gate.core import a\n",  # edges may do anything
    })
    assert purity_violations(root, "gate") == []


def test_checker_flags_an_import_cycle(tmp_path):
    root = make_package(tmp_path, {
        "gate/spec.py": "def f():\n    from gate.stages.gen import names\n",  # a lazy import still closes the loop
        "gate/stages/gen.py": "from gate.targets import T\nnames = 1\n",
        "gate/targets/__init__.py": "from gate.spec import f\nT = 1\n",
        "gate/ok.py": "from gate.spec import f\n",
    })
    assert cycles(graph(root, "gate")) == [["gate.spec", "gate.stages.gen", "gate.targets"]]


def test_checker_flags_a_package_that_imports_its_own_submodule(tmp_path):
    """gate/targets/__init__.py importing gate.targets.results, which lives in (and so depends on) gate.targets."""
    root = make_package(tmp_path, {
        "gate/targets/__init__.py": "def make():\n    from gate.targets.results import R\n",
        "gate/targets/results.py": "R = 1\n",
    })
    assert cycles(graph(root, "gate")) == [["gate.targets", "gate.targets.results"]]


def test_checker_sees_no_cycle_in_a_chain(tmp_path):
    root = make_package(tmp_path, {"gate/a.py": "from gate import b\n", "gate/b.py": "from gate import c\n", "gate/c.py": "X = 1\n"})
    assert cycles(graph(root, "gate")) == []


def test_checker_flags_the_run_package_reaching_up_and_a_stage_reaching_into_it(tmp_path):
    root = make_package(tmp_path, {
        "gate/run/flow.py": "from gate.stages import s\nfrom gate.cli.main import main\n",
        "gate/run/ok.py": "from gate.core import c\nfrom gate.config import spec\nfrom gate import __version__\n",
        "gate/stages/s.py": "def f():\n    from gate.run.flow import x\n",
        "gate/cli/main.py": "from gate.run.flow import run\n",  # the command line calls the run: fine
        "gate/core/c.py": "", "gate/config/spec.py": "",
    })
    found = run_package_violations(root, "gate")
    assert any(v.startswith("gate.run.flow:2: imports gate.cli.main") for v in found), found
    assert any(v.startswith("gate.stages.s:2: imports gate.run.flow") for v in found), found
    assert not any(v.startswith(("gate.run.ok", "gate.cli")) for v in found), found


def test_checker_measures_functions_and_modules(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(61))
    root = make_package(tmp_path, {
        "gate/long.py": "def long():\n" + body,
        "gate/params.py": "class C:\n    def m(self, a, b, c, d, e, f, g=1): ...\n\ndef ok(a, b, c, d, e, *rest): ...\n",
        "gate/big.py": "X = 1\n" * 401,
    })
    found = size_violations(root, "gate")
    assert "gate/long.py:long: 62 lines (at most 60)" in found
    assert any(v.startswith("gate/params.py:m: 7 parameters") for v in found)
    assert not any("gate/params.py:ok" in v for v in found)
    assert any(v.startswith("gate/big.py: 401 lines") for v in found)
