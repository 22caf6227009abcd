"""Shared infrastructure: database, Redis, errors, logging, dependencies."""
