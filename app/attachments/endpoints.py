from __future__ import annotations

import uuid

from fastapi import APIRouter, File, UploadFile, status
from fastapi.responses import JSONResponse

from app.attachments import service
from app.attachments.schemas import AttachmentList, AttachmentOut
from app.auth.principal import CurrentPrincipal
from app.core.deps import DbSession, ResourcesDep
from app.ingestion.uploads import read_upload

router = APIRouter(tags=["attachments"])


@router.post(
    "/attachments",
    response_model=AttachmentOut,
    status_code=status.HTTP_201_CREATED,
    responses={200: {"model": AttachmentOut, "description": "The same file, already uploaded"}},
)
async def upload_attachment(
    principal: CurrentPrincipal,
    session: DbSession,
    resources: ResourcesDep,
    file: UploadFile = File(description="PDF, plain text or Markdown"),
) -> JSONResponse:
    """Upload a document for your conversations; it is processed in the background."""
    data = await read_upload(
        file, resources.settings.max_upload_bytes, resources.settings.max_document_chars
    )
    attachment, duplicate = await service.upload(session, principal, data)
    await session.refresh(attachment)
    body = AttachmentOut.model_validate(attachment).model_dump(mode="json")
    return JSONResponse(body, status_code=200 if duplicate else 201)


@router.get("/attachments/{attachment_id}", response_model=AttachmentOut)
async def read_attachment(
    attachment_id: uuid.UUID, principal: CurrentPrincipal, session: DbSession
) -> AttachmentOut:
    return AttachmentOut.model_validate(await service.get_owned(session, principal, attachment_id))


@router.delete("/attachments/{attachment_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_attachment(
    attachment_id: uuid.UUID, principal: CurrentPrincipal, session: DbSession
) -> None:
    """Delete the attachment with its text, chunks, embeddings and session links."""
    await service.delete(session, principal, attachment_id)


@router.get("/sessions/{session_id}/attachments", response_model=AttachmentList)
async def list_session_attachments(
    session_id: uuid.UUID, principal: CurrentPrincipal, session: DbSession
) -> AttachmentList:
    """The documents active in this conversation."""
    items = await service.in_session(session, principal, session_id)
    return AttachmentList(items=[AttachmentOut.model_validate(a) for a in items])


@router.put(
    "/sessions/{session_id}/attachments/{attachment_id}", status_code=status.HTTP_204_NO_CONTENT
)
async def activate_attachment(
    session_id: uuid.UUID, attachment_id: uuid.UUID, principal: CurrentPrincipal, session: DbSession
) -> None:
    """Make one of your attachments part of this conversation's context."""
    await service.activate(session, principal, session_id, attachment_id)


@router.delete(
    "/sessions/{session_id}/attachments/{attachment_id}", status_code=status.HTTP_204_NO_CONTENT
)
async def deactivate_attachment(
    session_id: uuid.UUID, attachment_id: uuid.UUID, principal: CurrentPrincipal, session: DbSession
) -> None:
    """Take an attachment out of this conversation (it stays in your attachments)."""
    await service.deactivate(session, principal, session_id, attachment_id)
