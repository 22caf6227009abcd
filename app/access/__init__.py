"""Who may see which knowledge-base collections: read once per request or turn (ADR 0078)."""
