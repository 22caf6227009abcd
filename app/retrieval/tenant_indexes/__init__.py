"""Each large tenant's own HNSW index (ADR 0095): which are due and building them
(`maintenance`), and their statements (`repository`)."""
