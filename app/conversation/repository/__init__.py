"""SQL for turns and the chat session state a turn reads."""

from app.conversation.repository.sessions import SessionStateRepository
from app.conversation.repository.turns import HISTORY_STATUSES, Completed, TurnRepository

__all__ = ["HISTORY_STATUSES", "Completed", "SessionStateRepository", "TurnRepository"]
