"""Browser login: the access token goes to the page (kept in memory there), the refresh
token into an HttpOnly cookie the page's script never sees.

The cookie is `SameSite=Strict`, scoped to `/web/auth` (refresh and logout are the only
requests that carry it) and `Secure` outside development; both cookie-authenticated
requests also pass `check_same_origin` (docs/adr/0033).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Cookie, Depends, Request, Response, status

from app.auth import service
from app.auth.schemas import BrowserToken, LoginRequest
from app.config import Settings
from app.core.deps import DbSession, RedisDep, SessionmakerDep, SettingsDep
from app.core.errors import Unauthorized
from app.web.security import check_same_origin

COOKIE_NAME = "tl_refresh"
COOKIE_PATH = "/web/auth"

router = APIRouter(
    prefix=COOKIE_PATH,
    tags=["web"],
    include_in_schema=False,
    dependencies=[Depends(check_same_origin)],
)


RefreshCookie = Annotated[str | None, Cookie(alias=COOKIE_NAME)]


def set_refresh_cookie(response: Response, settings: Settings, refresh_token: str) -> None:
    """Give the browser its refresh cookie (a password login's, and a single sign-on's)."""
    secure = settings.web_cookie_secure
    response.set_cookie(
        COOKIE_NAME,
        refresh_token,
        max_age=settings.refresh_token_ttl_seconds,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=settings.env != "development" if secure is None else secure,
    )
    response.headers["Cache-Control"] = "no-store"


def _clear_cookie(response: Response, settings: Settings) -> None:
    secure = settings.web_cookie_secure
    response.delete_cookie(
        COOKIE_NAME,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=settings.env != "development" if secure is None else secure,
    )


@router.post("/login", response_model=BrowserToken)
async def login(
    request: Request,
    body: LoginRequest,
    response: Response,
    db: DbSession,
    settings: SettingsDep,
    redis: RedisDep,
) -> BrowserToken:
    """Log in from the browser: the access token in the body, the refresh token as a cookie."""
    client = request.client.host if request.client else None
    attempt = service.LoginAttempt(body.email, body.password, body.tenant, client)
    pair = await service.login(db, settings, redis, attempt)
    set_refresh_cookie(response, settings, pair.refresh_token)
    return BrowserToken(access_token=pair.access_token, expires_in=pair.expires_in)


@router.post("/refresh", response_model=BrowserToken)
async def refresh(
    response: Response,
    sessionmaker: SessionmakerDep,
    settings: SettingsDep,
    cookie: RefreshCookie = None,
) -> BrowserToken:
    """A new access token for the refresh cookie, which is rotated (each works once)."""
    if not cookie:
        raise Unauthorized("Not signed in.", code="not_signed_in")
    pair = await service.refresh(sessionmaker, settings, cookie)
    set_refresh_cookie(response, settings, pair.refresh_token)
    return BrowserToken(access_token=pair.access_token, expires_in=pair.expires_in)


@router.post("/logout", status_code=status.HTTP_204_NO_CONTENT)
async def logout(
    response: Response, db: DbSession, settings: SettingsDep, cookie: RefreshCookie = None
) -> None:
    """Sign this browser's login out (its whole token family) and drop the cookie."""
    _clear_cookie(response, settings)
    if cookie:
        await service.logout_refresh_token(db, settings, cookie)
