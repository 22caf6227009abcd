"""Threadline: a multi-tenant RAG chat platform."""
