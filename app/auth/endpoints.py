from __future__ import annotations

import json
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response, status
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from app.auth import service
from app.auth.principal import AdminPrincipal, CurrentPrincipal
from app.auth.schemas import (
    ApiKeyCreated,
    ApiKeyInfo,
    CreateApiKeyRequest,
    CreateUserRequest,
    LoginRequest,
    MeResponse,
    RefreshRequest,
    TokenResponse,
    UserResponse,
)
from app.core.deps import DbSession, RedisDep, SessionmakerDep, SettingsDep
from app.core.errors import BadRequest, error_responses
from app.core.pagination import CURSOR_FORM, cursor_schema

router = APIRouter(tags=["auth"])
admin_router = APIRouter(prefix="/admin", tags=["admin"])


def no_store(response: Response) -> None:
    """A response carrying a secret (token, key) must not be kept by any cache."""
    response.headers["Cache-Control"] = "no-store"
    response.headers["Pragma"] = "no-cache"


_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


async def login_request(request: Request) -> LoginRequest:
    """The login body: JSON `{"email","password"}` or an OAuth2 password form."""
    content_type = request.headers.get("content-type", "")
    data: Any
    if content_type.startswith(_FORM_TYPES):
        form = await request.form()
        data = {"email": form.get("username"), "password": form.get("password")}
        if form.get("tenant"):
            data["tenant"] = form.get("tenant")
    else:
        try:
            data = json.loads(await request.body() or b"null")
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise BadRequest("The request body is not valid JSON.", code="malformed_json") from exc
    try:
        return LoginRequest.model_validate(data)
    except ValidationError as exc:
        raise RequestValidationError(
            [{**err, "loc": ("body", *err["loc"])} for err in exc.errors()]
        ) from exc


_LOGIN_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": LoginRequest.model_json_schema()},
            "application/x-www-form-urlencoded": {
                "schema": {
                    "type": "object",
                    "required": ["username", "password"],
                    "properties": {
                        "username": {"type": "string", "description": "e-mail"},
                        "password": {"type": "string"},
                        "tenant": {"type": "string"},
                    },
                }
            },
        },
    }
}


@router.post(
    "/auth/token",
    response_model=TokenResponse,
    openapi_extra=_LOGIN_BODY,
    responses=error_responses(401, 403, 429),
)
async def issue_token(
    request: Request,
    response: Response,
    body: Annotated[LoginRequest, Depends(login_request)],
    db: DbSession,
    settings: SettingsDep,
    redis: RedisDep,
) -> TokenResponse:
    """Log in with e-mail and password; returns an access and a refresh token."""
    # The peer, or the client a trusted proxy forwarded for (ClientAddressMiddleware).
    client = request.client.host if request.client else None
    attempt = service.LoginAttempt(body.email, body.password, body.tenant, client)
    pair = await service.login(db, settings, redis, attempt)
    no_store(response)
    return TokenResponse(**pair.__dict__)


@router.post("/auth/refresh", response_model=TokenResponse, responses=error_responses(401))
async def refresh_token(
    body: RefreshRequest, response: Response, sessionmaker: SessionmakerDep, settings: SettingsDep
) -> TokenResponse:
    """Exchange a refresh token (once) for a new pair. A replayed token signs the session out."""
    pair = await service.refresh(sessionmaker, settings, body.refresh_token)
    no_store(response)
    return TokenResponse(**pair.__dict__)


@router.post("/auth/logout", status_code=status.HTTP_204_NO_CONTENT)
async def logout(principal: CurrentPrincipal, db: DbSession) -> None:
    """Sign this login out: its refresh token and every token derived from it stop working."""
    await service.logout(db, principal)


@router.get("/me", response_model=MeResponse)
async def me(principal: CurrentPrincipal) -> MeResponse:
    """Who the caller is (user, tenant, role)."""
    return MeResponse(
        id=principal.user_id,
        email=principal.email,
        tenant_id=principal.tenant_id,
        role=principal.role,
    )


@admin_router.post(
    "/users",
    response_model=UserResponse,
    status_code=status.HTTP_201_CREATED,
    responses=error_responses(409),
)
async def create_user(
    body: CreateUserRequest, admin: AdminPrincipal, db: DbSession, settings: SettingsDep
) -> UserResponse:
    """Add a user to the admin's tenant."""
    user = await service.create_user(
        db,
        settings,
        admin.tenant_id,
        email=body.email,
        password=body.password,
        role=body.role,
    )
    return UserResponse.model_validate(user)


@admin_router.post("/api-keys", response_model=ApiKeyCreated, status_code=status.HTTP_201_CREATED)
async def create_api_key(
    body: CreateApiKeyRequest, response: Response, admin: AdminPrincipal, db: DbSession
) -> ApiKeyCreated:
    """Create a server-to-server key acting as the admin. The key is shown only here."""
    key, raw = await service.create_api_key(db, admin, name=body.name, role=body.role)
    no_store(response)
    return ApiKeyCreated(
        id=key.id,
        key=raw,
        name=key.name,
        role=key.role,
        prefix=key.key_prefix,
    )


_NEXT_PAGE = {
    "Link": {
        "description": 'With `limit`, when more keys follow: `<…?limit=N&cursor=C>; rel="next"`',
        "schema": {"type": "string"},
    }
}


@admin_router.get(
    "/api-keys",
    response_model=list[ApiKeyInfo],
    responses={200: {"headers": _NEXT_PAGE}, **error_responses(400)},
)
async def list_api_keys(
    admin: AdminPrincipal,
    db: DbSession,
    response: Response,
    limit: Annotated[
        int | None, Query(ge=1, le=100, description="Page size; without it, every key")
    ] = None,
    cursor: Annotated[
        str | None,
        Query(max_length=200, json_schema_extra=cursor_schema(CURSOR_FORM, "from `Link`")),
    ] = None,
) -> list[ApiKeyInfo]:
    """The tenant's API keys, newest first (admins only). With `limit`, one page: the next
    is named by the `Link` header (`rel="next"`), so the body stays the list it always was."""
    if limit is None and not cursor:
        keys = await service.list_api_keys(db, admin)
    else:
        size = limit or 100
        keys, next_cursor = await service.page_api_keys(db, admin, limit=size, cursor=cursor)
        if next_cursor:
            response.headers["Link"] = (
                f'</admin/api-keys?limit={size}&cursor={next_cursor}>; rel="next"'
            )
    return [ApiKeyInfo.model_validate(key) for key in keys]


@admin_router.delete("/api-keys/{key_id}", status_code=status.HTTP_204_NO_CONTENT)
async def revoke_api_key(key_id: uuid.UUID, admin: AdminPrincipal, db: DbSession) -> None:
    """Revoke one of the tenant's API keys (admins only)."""
    await service.revoke_api_key(db, admin, key_id)
