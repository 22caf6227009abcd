"""Single sign-on over HTTP: the admin's settings (`/admin/sso`), the sign-in page's options,
and the two browser legs of the flow (`/sso/{tenant}/login`, `/sso/callback`)."""

from __future__ import annotations

import logging
import uuid
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Cookie, Query, Request, Response, status
from fastapi.responses import RedirectResponse

from app.auth.principal import AdminPrincipal
from app.config import Settings
from app.core.db import scope_to_tenant
from app.core.deps import DbSession, SessionmakerDep, SettingsDep
from app.core.errors import NotFound, error_responses
from app.models import SsoProvider
from app.sso import flow
from app.sso import settings as sso_settings
from app.sso.directory import ProviderDirectory, ProviderUnavailable
from app.sso.groups import group_sync
from app.sso.id_token import SsoRefused
from app.sso.repository import SsoProviderRepository
from app.sso.schemas import SignInOption, SignInOptions, SsoSettingsIn, SsoSettingsOut
from app.sso.secrets import unseal
from app.tenants.repository import find_tenant_by_name
from app.web.auth import set_refresh_cookie

logger = logging.getLogger(__name__)

BINDING_COOKIE = "tl_sso"
BINDING_PATH = "/sso"
CALLBACK_PATH = "/sso/callback"

router = APIRouter(prefix="/sso", tags=["sso"])
admin_router = APIRouter(prefix="/admin/sso", tags=["admin"])


def directory(request: Request, settings: Settings) -> ProviderDirectory:
    """The application's cache of provider documents and keys (made on first use)."""
    found: ProviderDirectory | None = getattr(request.app.state, "sso_directory", None)
    if found is None:
        found = ProviderDirectory(settings)
        request.app.state.sso_directory = found
    return found


def redirect_uri(request: Request, settings: Settings) -> str:
    """The one redirect URI of this deployment, to register at every tenant's provider."""
    base = settings.public_url or str(request.base_url)
    return base.rstrip("/") + CALLBACK_PATH


def _secure(settings: Settings) -> bool:
    chosen = settings.web_cookie_secure
    return settings.env != "development" if chosen is None else chosen


def _to_sign_in_page(code: str) -> RedirectResponse:
    return RedirectResponse("/?" + urlencode({"sso_error": code}), status.HTTP_303_SEE_OTHER)


@router.get("/options", response_model=SignInOptions)
async def sign_in_options(
    db: DbSession, tenant: Annotated[str, Query(min_length=1, max_length=100)]
) -> SignInOptions:
    """How the users of the named tenant sign in (the sign-in page asks). An unknown tenant
    answers like one without single sign-on, so names cannot be probed."""
    found = await find_tenant_by_name(db, " ".join(tenant.split()))
    if found is None:
        return SignInOptions(password_login=True, sso=[])
    await scope_to_tenant(db, found.id)
    provider = await SsoProviderRepository(db, found.id).get()
    if provider is None or not provider.enabled:
        return SignInOptions(password_login=True, sso=[])
    option = SignInOption(
        tenant_id=found.id,
        display_name=provider.display_name,
        login_url=f"/sso/{found.id}/login",
    )
    return SignInOptions(password_login=provider.password_login, sso=[option])


@router.get(
    "/{tenant_id}/login",
    status_code=status.HTTP_303_SEE_OTHER,
    response_class=RedirectResponse,
    responses=error_responses(404),
)
async def start_sign_in(
    tenant_id: uuid.UUID,
    request: Request,
    sessionmaker: SessionmakerDep,
    settings: SettingsDep,
    login_hint: Annotated[str | None, Query(max_length=254, pattern=r"^[^\x00-\x1f]*$")] = None,
) -> RedirectResponse:
    """Send the browser to the tenant's provider (303), bound to this browser by a cookie."""
    try:
        started = await flow.begin(
            sessionmaker,
            settings,
            directory(request, settings),
            tenant_id,
            redirect_uri=redirect_uri(request, settings),
            login_hint=login_hint,
        )
    except ProviderUnavailable as exc:
        logger.warning("sso: the provider of tenant %s is unavailable: %s", tenant_id, exc)
        return _to_sign_in_page("provider_unavailable")
    if started is None:
        raise NotFound("This tenant has no single sign-on.", code="sso_not_configured")
    response = RedirectResponse(started.url, status.HTTP_303_SEE_OTHER)
    response.set_cookie(
        BINDING_COOKIE,
        started.browser_binding,
        max_age=settings.sso_login_ttl_seconds,
        path=BINDING_PATH,
        httponly=True,
        samesite="lax",  # sent on the provider's top-level redirect back; Strict would not be
        secure=_secure(settings),
    )
    response.headers["Cache-Control"] = "no-store"
    return response


@router.get("/callback", status_code=status.HTTP_303_SEE_OTHER, response_class=RedirectResponse)
async def finish_sign_in(
    request: Request,
    sessionmaker: SessionmakerDep,
    settings: SettingsDep,
    state: Annotated[str | None, Query(max_length=200)] = None,
    code: Annotated[str | None, Query(max_length=4000)] = None,
    iss: Annotated[str | None, Query(max_length=500)] = None,
    error: Annotated[str | None, Query(max_length=200)] = None,
    binding: Annotated[str | None, Cookie(alias=BINDING_COOKIE)] = None,
) -> RedirectResponse:
    """The provider's answer: signed in, the browser goes to the web app with its refresh
    cookie set, as after a password login; refused, to the sign-in page with the reason."""
    callback = flow.Callback(state, code, iss, error, binding)
    try:
        pair = await flow.complete(
            sessionmaker,
            settings,
            directory(request, settings),
            group_sync(request.app),
            callback,
            redirect_uri=redirect_uri(request, settings),
        )
    except SsoRefused as refused:
        logger.warning("sso: sign-in refused (%s): %s", refused.code, refused.reason)
        response = _to_sign_in_page(refused.code)
    except ProviderUnavailable as exc:
        logger.warning("sso: the provider is unavailable: %s", exc)
        response = _to_sign_in_page("provider_unavailable")
    else:
        response = RedirectResponse("/", status.HTTP_303_SEE_OTHER)
        set_refresh_cookie(response, settings, pair.refresh_token)
    response.delete_cookie(
        BINDING_COOKIE, path=BINDING_PATH, httponly=True, samesite="lax", secure=_secure(settings)
    )
    response.headers["Cache-Control"] = "no-store"
    return response


def _shown(provider: SsoProvider, settings: Settings, request: Request) -> SsoSettingsOut:
    return SsoSettingsOut(
        display_name=provider.display_name,
        issuer=provider.issuer,
        client_id=provider.client_id,
        client_secret_set=unseal(settings, provider.client_secret_encrypted) is not None,
        allowed_domains=list(provider.allowed_domains),
        scopes=provider.scopes,
        groups_claim=provider.groups_claim,
        enabled=provider.enabled,
        password_login=provider.password_login,
        redirect_uri=redirect_uri(request, settings),
        updated_at=provider.updated_at,
    )


@admin_router.get("", response_model=SsoSettingsOut, responses=error_responses(404))
async def read_settings(
    request: Request, admin: AdminPrincipal, db: DbSession, settings: SettingsDep
) -> SsoSettingsOut:
    """The tenant's OpenID provider (admins only); the client secret is never returned."""
    return _shown(await sso_settings.get_settings(db, admin), settings, request)


@admin_router.put("", response_model=SsoSettingsOut, responses=error_responses(409))
async def write_settings(
    body: SsoSettingsIn,
    request: Request,
    response: Response,
    admin: AdminPrincipal,
    db: DbSession,
    settings: SettingsDep,
) -> SsoSettingsOut:
    """Create or replace the tenant's OpenID provider; audited (the secret redacted)."""
    provider = await sso_settings.put_settings(db, settings, admin, body)
    response.headers["Cache-Control"] = "no-store"
    return _shown(provider, settings, request)


@admin_router.delete("", status_code=status.HTTP_204_NO_CONTENT, responses=error_responses(404))
async def delete_settings(admin: AdminPrincipal, db: DbSession) -> None:
    """Remove the tenant's provider; password login is allowed again. Audited."""
    await sso_settings.delete_settings(db, admin)
