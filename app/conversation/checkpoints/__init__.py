"""LangGraph's checkpoints: the tenant-scoped saver and its bounded storage."""
