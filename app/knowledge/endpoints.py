"""/kb: tenant admins add, list and delete knowledge-base documents; anyone searches it."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from app.auth.principal import AdminPrincipal, CurrentPrincipal
from app.core.deps import DbSession, RedisDep, SettingsDep
from app.core.downloads import ORIGINAL_FILE, file_response
from app.core.errors import BadRequest, UnprocessableEntity, error_responses
from app.core.json_types import (
    JSON_OBJECT_WITHOUT_NUL,
    UPLOAD_MEDIA_TYPES,
    UPLOADED_FILE,
    JsonObject,
)
from app.core.pagination import CURSOR_FORM, cursor_schema
from app.ingestion.uploads import from_bytes, read_upload
from app.knowledge import service
from app.knowledge.deps import KbStatusDep, RetrieverDep
from app.knowledge.languages.service import checked_language
from app.knowledge.overview import overview
from app.knowledge.schemas import (
    COLLECTION_DESCRIPTION,
    LANGUAGE_SCHEMA,
    DocumentAccepted,
    DocumentOut,
    DocumentPage,
    OverviewOut,
    SearchIn,
    SearchOut,
    TextDocumentIn,
)
from app.limits.search import admit_search

router = APIRouter(prefix="/kb", tags=["knowledge base"])

_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {"type": "string", "format": "binary", **UPLOADED_FILE},
                        # NUL in these is 422 `invalid_data`, but schemathesis 4.32 mutates a
                        # multipart part's `pattern` into values that match it: said in words.
                        "title": {"type": "string", "description": "No NUL (422)."},
                        "external_id": {"type": "string", "description": "No NUL (422)."},
                        "metadata": {"type": "object", **JSON_OBJECT_WITHOUT_NUL},
                        "language": {
                            "type": "string",
                            **LANGUAGE_SCHEMA,
                            "description": "The document's own text-search language "
                            "(`GET /admin/settings` lists them; 422 otherwise); none: the "
                            "tenant's.",
                        },
                        "collection_id": {
                            "type": "string",
                            "format": "uuid",
                            "description": COLLECTION_DESCRIPTION,
                        },
                    },
                },
                "encoding": {
                    "metadata": {"contentType": "application/json"},
                    "file": UPLOAD_MEDIA_TYPES,
                },
            },
            "application/json": {"schema": TextDocumentIn.model_json_schema()},
        },
    }
}


@router.post(
    "/documents",
    response_model=DocumentAccepted,
    status_code=status.HTTP_202_ACCEPTED,
    openapi_extra=_BODY,
    responses={
        200: {"model": DocumentAccepted, "description": "Already in the knowledge base"},
        **error_responses(404),
    },
)
async def add_document(
    request: Request, admin: AdminPrincipal, db: DbSession, settings: SettingsDep
) -> Any:
    """Add a file (PDF, text, Markdown) or a text; it is ingested in the background.
    The same content again returns the existing document (200)."""
    if request.headers.get("content-type", "").startswith("multipart/form-data"):
        form = await request.form()
        file = form.get("file")
        if file is None or isinstance(file, str):
            raise UnprocessableEntity("Send the document as the multipart field `file`.")
        upload = await read_upload(file, settings.max_upload_bytes, settings.max_document_chars)
        title, external_id = form.get("title"), form.get("external_id")
        metadata = _metadata(form.get("metadata"))
        title = title if isinstance(title, str) else None
        external_id = external_id if isinstance(external_id, str) else None
        given_language = form.get("language")
        language = given_language if isinstance(given_language, str) and given_language else None
        collection_id = _collection_id(form.get("collection_id"))
    else:
        try:
            body = TextDocumentIn.model_validate_json(await request.body())
        except ValidationError as exc:
            raise _as_request_error(exc) from exc
        upload = replace(
            from_bytes(body.text.encode(), None, settings.max_document_chars),
            content_type=body.content_type,
        )
        title, external_id, metadata = body.title, body.external_id, body.metadata
        language, collection_id = body.language, body.collection_id
    document, duplicate = await service.add_document(
        db,
        admin.tenant_id,
        upload,
        title=title,
        external_id=external_id,
        metadata=metadata,
        created_by=admin.user_id,
        language=await checked_language(db, language) if language else None,
        collection_id=collection_id,
    )
    accepted = DocumentAccepted(
        id=document.id,
        status=document.status,
        duplicate=duplicate,
        collection_id=document.collection_id,
    )
    return JSONResponse(accepted.model_dump(mode="json"), status_code=200 if duplicate else 202)


def _collection_id(raw: object) -> uuid.UUID | None:
    """The multipart `collection_id`: absent or empty (a picker left at its default) is the
    default collection; anything but a UUID is 422."""
    if raw is None or raw == "":
        return None
    try:
        return uuid.UUID(str(raw))
    except ValueError as exc:
        raise UnprocessableEntity("`collection_id` must be a collection's id (a UUID).") from exc


def _metadata(raw: object) -> JsonObject:
    if raw is None:
        return {}
    try:
        value = json.loads(str(raw))
    except json.JSONDecodeError as exc:
        raise BadRequest("`metadata` must be a JSON object.", code="malformed_json") from exc
    if not isinstance(value, dict):
        raise UnprocessableEntity("`metadata` must be a JSON object.")
    return value


def _as_request_error(exc: ValidationError) -> RequestValidationError:
    """Rendered like any JSON body's errors: malformed JSON is 400 `malformed_json`, the rest
    422 with details."""
    return RequestValidationError([{**err, "loc": ("body", *err["loc"])} for err in exc.errors()])


@router.get("/documents", response_model=DocumentPage, responses=error_responses(400))
async def list_documents(
    admin: AdminPrincipal,
    db: DbSession,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: Annotated[
        str | None,
        Query(max_length=200, json_schema_extra=cursor_schema(CURSOR_FORM, "opaque")),
    ] = None,
) -> DocumentPage:
    """The tenant's documents with their ingestion status and progress, newest first."""
    items, next_cursor = await service.list_documents(db, admin, limit=limit, cursor=cursor)
    return DocumentPage(
        items=[DocumentOut.model_validate(d) for d in items], next_cursor=next_cursor
    )


@router.get("/overview", response_model=OverviewOut)
async def read_overview(principal: CurrentPrincipal, db: DbSession) -> OverviewOut:
    """What the tenant's knowledge base covers (its newest ready documents' titles and
    headings) and three questions drawn from it, for a new chat; read-only, any member."""
    return OverviewOut.model_validate(await overview(db, principal.tenant_id))


@router.get("/documents/{document_id}", response_model=DocumentOut)
async def read_document(
    document_id: uuid.UUID, admin: AdminPrincipal, db: DbSession
) -> DocumentOut:
    """One knowledge-base document (admins only)."""
    return DocumentOut.model_validate(await service.get_document(db, admin, document_id))


@router.get(
    "/documents/{document_id}/file",
    response_class=Response,
    responses={200: ORIGINAL_FILE, **error_responses(404)},
)
async def read_document_file(
    document_id: uuid.UUID, principal: CurrentPrincipal, db: DbSession
) -> Response:
    """The document's original file, as a download (a PDF inline), sandboxed: for an admin,
    and for a member once it is searchable (ready)."""
    return file_response(await service.original_file(db, principal, document_id))


@router.delete("/documents/{document_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_document(
    document_id: uuid.UUID, admin: AdminPrincipal, db: DbSession, kb_status: KbStatusDep
) -> None:
    """Delete the document with its chunks and embeddings."""
    await service.delete_document(db, kb_status, admin, document_id)


@router.post("/search", response_model=SearchOut)
async def search(
    body: SearchIn,
    principal: CurrentPrincipal,
    db: DbSession,
    retriever: RetrieverDep,
    redis: RedisDep,
    settings: SettingsDep,
) -> SearchOut:
    """The same hybrid retrieval the chat uses, over the tenant's knowledge base, ranked;
    at most `THREADLINE_RATE_LIMIT_SEARCH_PER_MIN` a minute per user (429 above)."""
    await admit_search(redis, principal.user_id, settings.rate_limit_search_per_min)
    hits = await service.search(db, retriever, principal.tenant_id, body.query, k=body.k)
    return SearchOut.of(hits)
