"""Admin audit: reading turns' context metadata, and the append-only log of such reads."""
