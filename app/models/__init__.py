"""ORM models, one module per table, imported together so Alembic sees the whole schema."""

from app.core.db import Base
from app.models.api_key import ApiKey
from app.models.attachment import Attachment
from app.models.attachment_chunk import AttachmentChunk
from app.models.audit_log import AuditLog
from app.models.chat_session import ChatSession
from app.models.embedding_space import EmbeddingSpace
from app.models.faq import Faq
from app.models.group import Group
from app.models.group_member import GroupMember
from app.models.kb_chunk import KbChunk
from app.models.kb_collection import KbCollection
from app.models.kb_collection_group import KbCollectionGroup
from app.models.kb_document import KbDocument
from app.models.kb_document_event import KbDocumentEvent
from app.models.kb_term_stats import KbCorpusStats, KbTermPosting, KbTermStats
from app.models.query_history import QueryHistory
from app.models.refresh_token_family import RefreshTokenFamily
from app.models.refresh_token_use import RefreshTokenUse
from app.models.session_attachment import SessionAttachment
from app.models.session_collection import SessionCollection
from app.models.sso_login_attempt import SsoLoginAttempt
from app.models.sso_provider import SsoProvider
from app.models.tenant import Tenant
from app.models.turn_feedback import TurnFeedback
from app.models.user import User

# Tables whose every row belongs to one tenant: row-level security is enabled and forced on
# each, and the migration tests check that this list matches the database.
TENANT_OWNED_TABLES = (
    "users",
    "api_keys",
    "chat_sessions",
    "query_history",
    "attachments",
    "attachment_chunks",
    "session_attachments",
    "kb_documents",
    "kb_chunks",
    "kb_document_events",
    "audit_log",
    "refresh_token_families",
    "refresh_token_uses",
    "kb_term_stats",
    "kb_corpus_stats",
    "kb_term_postings",
    "faqs",
    "sso_providers",
    "sso_login_attempts",
    "turn_feedback",
    "groups",
    "group_members",
    "kb_collections",
    "kb_collection_groups",
    "session_collections",
)

__all__ = [
    "TENANT_OWNED_TABLES",
    "ApiKey",
    "Attachment",
    "AttachmentChunk",
    "AuditLog",
    "Base",
    "ChatSession",
    "EmbeddingSpace",
    "Faq",
    "Group",
    "GroupMember",
    "KbChunk",
    "KbCollection",
    "KbCollectionGroup",
    "KbCorpusStats",
    "KbDocument",
    "KbDocumentEvent",
    "KbTermPosting",
    "KbTermStats",
    "QueryHistory",
    "RefreshTokenFamily",
    "RefreshTokenUse",
    "SessionAttachment",
    "SessionCollection",
    "SsoLoginAttempt",
    "SsoProvider",
    "Tenant",
    "TurnFeedback",
    "User",
]
