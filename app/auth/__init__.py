"""Authentication: passwords, JWTs, API keys, the request's principal."""
