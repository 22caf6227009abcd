"""The Celery application. Broker: `CELERY_BROKER_URL`, else `REDIS_URL`.

Without either (the embedded default) nothing is enqueued: jobs run in-process instead (see
`app.core.jobs` in later modules). Task modules register themselves through `include`.
"""

from __future__ import annotations

from celery import Celery

from app.config import Settings, get_settings

TASK_MODULES: list[str] = ["app.worker.tasks", "app.retention.tasks"]


def create_celery(settings: Settings | None = None) -> Celery:
    settings = settings or get_settings()
    broker = settings.celery_broker_url or settings.redis_url or "memory://"
    app = Celery("threadline", broker=broker, include=TASK_MODULES)
    app.conf.update(
        task_acks_late=True,  # a task whose worker dies is redelivered, not lost
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_serializer="json",
        accept_content=["json"],
        timezone="UTC",
        broker_connection_retry_on_startup=True,
        beat_schedule={
            "retention-sweep": {
                "task": "threadline.retention.sweep",  # app.retention.tasks.SWEEP
                "schedule": float(settings.retention_sweep_seconds),
            }
        },
    )
    return app


celery_app = create_celery()
