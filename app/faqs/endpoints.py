"""/admin/faqs: tenant admins curate the question/answer pairs triage answers from."""

from __future__ import annotations

import uuid
from datetime import datetime

from fastapi import APIRouter, status
from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.auth.principal import AdminPrincipal
from app.core.deps import DbSession
from app.core.errors import error_responses
from app.core.json_types import NO_NUL
from app.faqs import service
from app.faqs.deps import EmbedderDep, PolicyCacheDep

router = APIRouter(prefix="/admin/faqs", tags=["admin"])


class FaqIn(BaseModel):
    """The body of a new FAQ: a question and its answer, trimmed."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, max_length=1000, pattern=NO_NUL)
    answer: str = Field(min_length=1, max_length=8000, pattern=NO_NUL)

    @field_validator("question", "answer")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value.strip()


class FaqCreated(BaseModel):
    """The id of a created FAQ."""

    id: uuid.UUID


class FaqOut(BaseModel):
    """One FAQ as the API shows it."""

    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    question: str
    answer: str
    created_at: datetime


class FaqList(BaseModel):
    """The tenant's FAQs."""

    items: list[FaqOut]


@router.post(
    "",
    response_model=FaqCreated,
    status_code=status.HTTP_201_CREATED,
    responses=error_responses(409),
)
async def create_faq(
    body: FaqIn,
    admin: AdminPrincipal,
    db: DbSession,
    embedder: EmbedderDep,
    policies: PolicyCacheDep,
) -> FaqCreated:
    """Add a FAQ (admins only)."""
    faq = await service.create_faq(
        db, embedder, policies, admin.tenant_id, body.question, body.answer
    )
    return FaqCreated(id=faq.id)


@router.get("", response_model=FaqList)
async def list_faqs(admin: AdminPrincipal, db: DbSession) -> FaqList:
    """The tenant's FAQs (admins only)."""
    items = await service.list_faqs(db, admin.tenant_id)
    return FaqList(items=[FaqOut.model_validate(f) for f in items])


@router.get("/{faq_id}", response_model=FaqOut)
async def read_faq(faq_id: uuid.UUID, admin: AdminPrincipal, db: DbSession) -> FaqOut:
    """One FAQ (admins only)."""
    return FaqOut.model_validate(await service.get_faq(db, admin.tenant_id, faq_id))


@router.delete("/{faq_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_faq(
    faq_id: uuid.UUID, admin: AdminPrincipal, db: DbSession, policies: PolicyCacheDep
) -> None:
    """Remove a FAQ (admins only)."""
    await service.delete_faq(db, policies, admin.tenant_id, faq_id)
