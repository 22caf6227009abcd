"""Worker tasks. Ingestion and retention tasks join this module in their issues."""

from __future__ import annotations

from app.worker.celery_app import celery_app


@celery_app.task(name="threadline.ping")
def ping() -> str:
    """A no-op used by health checks and smoke tests."""
    return "pong"
