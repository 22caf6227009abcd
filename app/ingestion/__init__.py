"""Document ingestion: extract → sanitise → chunk → embed → index, with status and progress."""
