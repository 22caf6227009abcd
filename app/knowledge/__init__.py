"""The tenant's knowledge base: documents, their ingestion, and search."""
