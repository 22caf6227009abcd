"""A tenant's text-search language and a document's own: the setting, the background
rebuild of the lexical index, and their SQL (ADR 0076)."""
