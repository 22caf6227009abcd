"""Knowledge-base collections: who may see which documents (issue 30, item 2; ADR 0078)."""
