"""The pure core: the data model, the metric catalog and maths, sampling, statistics, gate decisions,
comparisons with references and the verdict.

Nothing here does I/O, talks to a network, reads the clock or the environment: the time of a run
and its commit come in as arguments. Every edge (targets, judges, files, GitHub) builds on this
package, never the other way round; tests/unit/test_architecture.py enforces it.
"""
