"""Celery: the worker and beat processes of docker compose."""
