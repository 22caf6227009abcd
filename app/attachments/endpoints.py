"""Attachments: a user's uploaded documents and which chat sessions they are active in."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, File, Response, UploadFile, status
from fastapi.responses import JSONResponse

from app.attachments import service
from app.attachments.schemas import AttachmentList, AttachmentOut
from app.auth.principal import CurrentPrincipal
from app.core.deps import DbSession, SettingsDep
from app.core.downloads import ORIGINAL_FILE, file_response
from app.core.errors import error_responses
from app.core.json_types import UPLOAD_MEDIA_TYPES, UPLOADED_FILE
from app.ingestion.uploads import read_upload

router = APIRouter(tags=["attachments"])


@router.post(
    "/attachments",
    response_model=AttachmentOut,
    status_code=status.HTTP_201_CREATED,
    responses={200: {"model": AttachmentOut, "description": "The same file, already uploaded"}},
    openapi_extra={
        "requestBody": {
            "content": {"multipart/form-data": {"encoding": {"file": UPLOAD_MEDIA_TYPES}}}
        }
    },
)
async def upload_attachment(
    principal: CurrentPrincipal,
    db: DbSession,
    settings: SettingsDep,
    file: UploadFile = File(json_schema_extra=UPLOADED_FILE),
) -> JSONResponse:
    """Upload a document for your conversations; it is processed in the background."""
    data = await read_upload(file, settings.max_upload_bytes, settings.max_document_chars)
    attachment, duplicate = await service.upload(db, principal, data)
    body = AttachmentOut.model_validate(attachment).model_dump(mode="json")
    return JSONResponse(body, status_code=200 if duplicate else 201)


@router.get("/attachments/{attachment_id}", response_model=AttachmentOut)
async def read_attachment(
    attachment_id: uuid.UUID, principal: CurrentPrincipal, db: DbSession
) -> AttachmentOut:
    """One of the caller's attachments, with its status."""
    return AttachmentOut.model_validate(await service.get_owned(db, principal, attachment_id))


@router.get(
    "/attachments/{attachment_id}/file",
    response_class=Response,
    responses={200: ORIGINAL_FILE, **error_responses(404)},
)
async def read_attachment_file(
    attachment_id: uuid.UUID, principal: CurrentPrincipal, db: DbSession
) -> Response:
    """The original file of one of the caller's attachments, as a download (a PDF inline),
    sandboxed."""
    return file_response(await service.original_file(db, principal, attachment_id))


@router.delete("/attachments/{attachment_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_attachment(
    attachment_id: uuid.UUID, principal: CurrentPrincipal, db: DbSession
) -> None:
    """Delete the attachment with its text, chunks, embeddings and session links."""
    await service.delete(db, principal, attachment_id)


@router.get("/sessions/{session_id}/attachments", response_model=AttachmentList)
async def list_session_attachments(
    session_id: uuid.UUID, principal: CurrentPrincipal, db: DbSession
) -> AttachmentList:
    """The documents active in this conversation."""
    items = await service.in_session(db, principal, session_id)
    return AttachmentList(items=[AttachmentOut.model_validate(a) for a in items])


@router.put(
    "/sessions/{session_id}/attachments/{attachment_id}", status_code=status.HTTP_204_NO_CONTENT
)
async def activate_attachment(
    session_id: uuid.UUID, attachment_id: uuid.UUID, principal: CurrentPrincipal, db: DbSession
) -> None:
    """Make one of your attachments part of this conversation's context."""
    await service.activate(db, principal, session_id, attachment_id)


@router.delete(
    "/sessions/{session_id}/attachments/{attachment_id}", status_code=status.HTTP_204_NO_CONTENT
)
async def deactivate_attachment(
    session_id: uuid.UUID, attachment_id: uuid.UUID, principal: CurrentPrincipal, db: DbSession
) -> None:
    """Take an attachment out of this conversation (it stays in your attachments)."""
    await service.deactivate(db, principal, session_id, attachment_id)
