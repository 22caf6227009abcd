"""The Celery application of the worker and beat processes (`celery -A app.worker.celery_app`).

Built by `app.bootstrap.create_celery`, as the API's publisher is: one configuration for
both ends. Broker: `CELERY_BROKER_URL`, else `REDIS_URL`. Without either (the embedded
default) nothing is enqueued: jobs run in-process instead (`app.core.jobs.InProcessJobs`).
Task modules register themselves through `include` (`app.bootstrap.TASK_MODULES`).
"""

from __future__ import annotations

from app.bootstrap import create_celery

celery_app = create_celery()
