"""Embedding models behind one small interface (SPEC §3)."""
