"""The build of gate.core._native, the retrieval run's hot loops in C (the rest is in pyproject.toml). Optional: where it
cannot be compiled (no C compiler), rag-gate installs without it and runs the same code in Python.
RAG_GATE_NO_NATIVE=1 builds without it: a pure-Python wheel (py3-none-any), which a package index takes from any
platform; the sdist holds the C source either way, so an install from it compiles the module."""

import os

from setuptools import Extension, setup

native = [Extension("gate.core._native", ["gate/core/_native.c", "gate/core/_ranked.c"], optional=True, extra_compile_args=["-O2"])]
setup(ext_modules=[] if os.environ.get("RAG_GATE_NO_NATIVE") == "1" else native)
