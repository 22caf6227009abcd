"""The database remembers which model filled its vectors. With `THREADLINE_EMBEDDER` unset,
a database keeps that model (a new default never strands an existing install); a different
model set explicitly is refused at start-up instead of silently mixing incomparable vectors.
`threadline reindex` is the one way to move a database to another model."""

from __future__ import annotations

import logging
from typing import TypedDict

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.embeddings.base import Embedder
from app.embeddings.repository import record_space, recorded_space, vector_column_dimension

logger = logging.getLogger(__name__)

SPACE = "default"

_KIND_OF_MODEL = {
    "hashing-v1": "hashing",
    "all-MiniLM-L6-v2-onnx-int8": "onnx",
    "sentence-transformers/all-MiniLM-L6-v2": "minilm",
}
"""`THREADLINE_EMBEDDER` for each model name a database may have on record (the embedders'
`name`); an `openai/<model>` name maps to `openai` with that model."""


class EmbedderSettings(TypedDict, total=False):
    """The settings (`THREADLINE_EMBEDDER...`) that build an embedder."""

    embedder: str
    embedding_model: str
    embedding_dim: int


def settings_for_model(model: str, dimension: int) -> EmbedderSettings | None:
    """The settings that build the embedder which made `model`'s vectors; None: unknown."""
    if model.startswith("openai/"):
        return EmbedderSettings(
            embedder="openai",
            embedding_model=model.removeprefix("openai/"),
            embedding_dim=dimension,
        )
    kind = _KIND_OF_MODEL.get(model)
    return None if kind is None else EmbedderSettings(embedder=kind, embedding_dim=dimension)


async def keep_recorded_embedder(
    settings: Settings, sessionmaker: async_sessionmaker[AsyncSession]
) -> Settings:
    """`settings` with the embedder that filled this database, when `THREADLINE_EMBEDDER` is
    not set: an install made before the default changed keeps searching its own vectors
    until `threadline reindex` moves it. An explicit setting is left to the start-up check
    (`check_embedding_space`), which refuses a mismatch."""
    if "embedder" in settings.model_fields_set:
        return settings
    try:
        async with sessionmaker() as db:
            recorded = await recorded_space(db, SPACE)
    except Exception:  # PostgreSQL down: the default stands; the start-up check runs later
        logger.warning("could not read the embedding space on record", exc_info=True)
        return settings
    if recorded is None:
        return settings
    update = settings_for_model(recorded.model, recorded.dimension)
    if update is None or update["embedder"] == settings.embedder:
        return settings
    logger.warning(
        "this database's vectors were made by %s: THREADLINE_EMBEDDER is unset, so the "
        "database keeps %s; `threadline reindex` re-embeds it with the default (%s)",
        recorded.model,
        update["embedder"],
        settings.embedder,
    )
    return settings.model_copy(update=update)


class EmbeddingMismatchError(RuntimeError):
    """The configured embedder differs from the one that filled this database."""


async def check_embedding_space(db: AsyncSession, embedder: Embedder) -> None:
    """Record the embedder on first use; refuse a different model or dimension later."""
    column = await vector_column_dimension(db)
    if column is not None and column != embedder.dimension:
        raise EmbeddingMismatchError(
            f"the vector columns hold {column} dimensions but {embedder.name} produces "
            f"{embedder.dimension}: set THREADLINE_EMBEDDER back, or run "
            "`threadline reindex` to re-embed everything with the new model"
        )
    recorded = await record_space(db, SPACE, embedder.name, embedder.dimension)
    if (recorded.model, recorded.dimension) != (embedder.name, embedder.dimension):
        raise EmbeddingMismatchError(
            f"this database's vectors were made by {recorded.model} ({recorded.dimension} "
            f"dimensions), not {embedder.name} ({embedder.dimension}): set THREADLINE_EMBEDDER "
            "back, or run `threadline reindex` to re-embed everything with the new one"
        )
