"""rag-gate: gate pull requests on the quality of a RAG system."""

__version__ = "0.1.0"
