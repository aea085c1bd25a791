"""The three stages, in the order they run: retrieval (pure), generation and robustness (they judge, through
the shared step in gate.stages.judging). Each returns a ``StageMeasurement``; gate.core.verdict.gate_stage turns
it into the report's stage the same way for all three."""
