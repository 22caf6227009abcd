"""SQL for turns and the chat session state a turn reads."""

from app.turns.repository.sessions import SessionStateRepository
from app.turns.repository.turns import HISTORY_STATUSES, Completed, TurnRepository

__all__ = ["HISTORY_STATUSES", "Completed", "SessionStateRepository", "TurnRepository"]
