"""The production Celery app, for `celery worker` processes started by the tests.

With `THREADLINE_TEST_EMBED_DELAY` set, the embedder waits that many seconds before each
call, so a test can kill a worker in the middle of a document. The hook lives here, in the
tests: the production worker has none.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence

from app.config import Settings
from app.embeddings import factory
from app.embeddings.base import Embedder
from app.embeddings.hashing import HashingEmbedder
from app.worker.celery_app import celery_app

DELAY = float(os.environ.get("THREADLINE_TEST_EMBED_DELAY") or 0)


class SlowEmbedder(HashingEmbedder):
    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        await asyncio.sleep(DELAY)
        return await super().embed(texts)


def _slow_embedder(settings: Settings) -> Embedder:
    return SlowEmbedder(settings.embedding_dim)  # the same name and vectors as `hashing`


if DELAY:
    factory.build_embedder = _slow_embedder

__all__ = ["celery_app"]
