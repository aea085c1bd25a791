"""Files rag-gate reads and writes: the golden set, the baseline, the local history, reports (written
atomically, read back through report.schema.json)."""
