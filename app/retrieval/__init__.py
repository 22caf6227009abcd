"""Retrieval over the knowledge base and session attachments."""
