from __future__ import annotations

from sqlalchemy import Integer, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base, Timestamped


class EmbeddingSpace(Timestamped, Base):
    """The embedding model and dimension behind every stored vector (one row, "default")."""

    __tablename__ = "embedding_space"

    name: Mapped[str] = mapped_column(Text, primary_key=True)
    model: Mapped[str] = mapped_column(Text)
    dimension: Mapped[int] = mapped_column(Integer)
