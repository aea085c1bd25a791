"""One run, as data flows: spec -> golden set -> the target's answers -> stages -> gates -> report.

    options   how to run: the clock, the commit, where the history and baseline come from, progress
    load      the spec, the golden set, the history and the baseline (the one thing a run reads first)
    ask       the target once per case
    context   what the judged stages share (StageContext, built once), and the facts the report records (RunFacts)
    measure   the judged stages (generation, robustness) on the answers, against the paired runs
    evaluate  pure: what was measured and what it is compared with in, the report out
    notes     what the report says about the run beside its figures
    flow      load, ask, measure, evaluate: ``run`` and ``run_viewed``
    shards    one shard of a run over a CI matrix (its part), and reading parts back
    merge     the parts made one run again, through the stages' own aggregation
    plan      what a run will do and spend, before it spends

The run package imports the layers below it (core, config, io, judges, stages, targets) and nothing above: the
command line, the application and the GitHub edge call it (tests/unit/test_architecture.py holds the rule).
"""
