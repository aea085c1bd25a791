"""The build of gate.core._native, the retrieval run's hot loops in C (the rest is in pyproject.toml). Optional: where it
cannot be compiled (no C compiler), rag-gate installs without it and runs the same code in Python."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("gate.core._native", ["gate/core/_native.c"], optional=True, extra_compile_args=["-O2"])])
