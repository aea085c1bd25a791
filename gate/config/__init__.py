"""The spec, rag-eval.yml: YAML loading with the line of every key, validation against config.schema.json,
defaults, semantic checks and ${NAME} expansion."""
