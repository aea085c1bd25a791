"""The architecture, enforced: the pure core imports no edge, and no module of gate/ takes part in an import cycle.

The rules, read from the source with ``ast`` (every import counts: module level, inside functions, under
TYPE_CHECKING; and a module depends on the package it lives in, whose ``__init__`` runs first):

* ``gate.core`` imports only ``gate.core`` and the standard library, and none of the standard library that does
  I/O or reads the world (os, sys, time, socket, subprocess, threading, asyncio, pathlib, tempfile, logging,
  sqlite3, urllib.request, http.client, shutil, io...); it never calls open(), print(), input(), nor a clock (``.now()``,
  ``.utcnow()``, ``.today()``, ``time()``).
* ``gate.render`` (reports rendered to strings) follows the same rules, and may import ``gate.core``.
* No import cycle among the modules of ``gate``.

The tests at the bottom run the checker on small made-up packages, to show that it does catch each kind of breach.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PURE = {"gate.core": ("gate.core",), "gate.render": ("gate.core", "gate.render")}
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


# --------------------------------------------------------------------------- the rules, on gate/


def test_pure_layers_import_no_edge():
    assert purity_violations(ROOT, "gate") == []


def test_no_module_of_gate_takes_part_in_an_import_cycle():
    assert cycles(graph(ROOT, "gate")) == []


def test_the_layers_exist_and_are_checked():
    names = set(modules(ROOT, "gate"))
    for layer in ("gate.core", "gate.render", "gate.stages", "gate.config", "gate.io", "gate.github", "gate.judges", "gate.targets"):
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
