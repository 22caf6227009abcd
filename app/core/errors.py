"""Domain errors carry their HTTP status and a stable code; one set of handlers renders them.

Every failure leaves the server as `{"error": {"code", "message"}}` (plus `details` for
validation errors and `request_id` always). Unexpected exceptions are caught by
`RequestContextMiddleware`, logged with their trace and answered with a generic 500.

Over 300 lines because the error classes, their documented schema and the handlers that
render them are one contract: a new error is added to all three here.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from app.core.db_outage import is_db_unavailable
from app.core.request_context import current_request_id

logger = logging.getLogger(__name__)


class AppError(Exception):
    """Base of domain errors: each carries its HTTP status, a stable code and a message."""

    status_code = 500
    code = "internal_error"
    message = "Internal server error."

    def __init__(
        self,
        message: str | None = None,
        *,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.message = message or self.message
        self.code = code or self.code
        self.headers = headers
        super().__init__(self.message)

    @classmethod
    def of(cls, status_code: int, code: str, message: str) -> AppError:
        """An error with a status known only at run time (e.g. relayed from a stream)."""
        error = cls(message, code=code)
        error.status_code = status_code
        return error


class BadRequest(AppError):
    """400: the request is malformed."""

    status_code, code, message = 400, "bad_request", "The request is malformed."


class Unauthorized(AppError):
    """401: the caller is not authenticated (sends `WWW-Authenticate: Bearer`)."""

    status_code, code, message = 401, "unauthorized", "Authentication required."

    def __init__(self, message: str | None = None, *, code: str | None = None) -> None:
        super().__init__(message, code=code, headers={"WWW-Authenticate": "Bearer"})


class RefreshTokenReused(Unauthorized):
    """A refresh token was presented twice: its whole family has been revoked."""


class Forbidden(AppError):
    """403: the caller may not do this."""

    status_code, code, message = 403, "forbidden", "You do not have permission to do this."


class NotFound(AppError):
    """404: no such resource, or not the caller's."""

    status_code, code, message = 404, "not_found", "Not found."


class Conflict(AppError):
    """409: the request conflicts with the current state."""

    status_code, code, message = 409, "conflict", "The resource already exists."


class PayloadTooLarge(AppError):
    """413: the request body is too large."""

    status_code, code, message = 413, "payload_too_large", "The request body is too large."


class UnsupportedMediaType(AppError):
    """415: the content type is not accepted."""

    status_code, code, message = 415, "unsupported_media_type", "Unsupported media type."


class UnprocessableEntity(AppError):
    """422: the request is well-formed but invalid."""

    status_code, code, message = 422, "validation_error", "The request is invalid."


class TooManyRequests(AppError):
    """429: a limit was reached; usually with `Retry-After`."""

    status_code, code, message = 429, "rate_limited", "Too many requests."


class ServiceUnavailable(AppError):
    """503: a dependency is down for now; usually with `Retry-After`."""

    status_code, code, message = 503, "service_unavailable", "Service temporarily unavailable."


_STATUS_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "validation_error",
    429: "rate_limited",
    503: "service_unavailable",
}


class ErrorDetail(BaseModel):
    """What went wrong: a stable code, a message and the request id."""

    code: str
    message: str
    request_id: str | None = None
    details: list[dict[str, Any]] | None = None
    """Validation errors (422): `loc`, `msg`, `type` of each."""


class ErrorResponse(BaseModel):
    """The body of every error response."""

    error: ErrorDetail


_DESCRIPTIONS = {
    400: "Malformed request (`malformed_json`, `invalid_cursor`, ...)",
    401: "Not authenticated",
    403: "Not allowed (`admin_required`)",
    404: "Not found, or not yours",
    409: "Conflict with the current state",
    413: "The body is too large",
    415: "Unsupported Content-Type",
    422: "Invalid request (`validation_error` with `details`, ...)",
    429: "Too many requests (`Retry-After`)",
    503: "Temporarily unavailable (`Retry-After`)",
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` for these error statuses, each with the error body's schema."""
    return {
        status: {"model": ErrorResponse, "description": _DESCRIPTIONS.get(status, "Error")}
        for status in statuses
    }


def error_body(code: str, message: str, **extra: Any) -> dict[str, Any]:
    """The JSON error envelope, with the current request id."""
    body: dict[str, Any] = {"code": code, "message": message, **extra}
    request_id = current_request_id()
    if request_id:
        body["request_id"] = request_id
    return {"error": body}


def error_response(
    status: int,
    code: str,
    message: str,
    headers: Mapping[str, str] | None = None,
    **extra: Any,
) -> JSONResponse:
    """A JSON error response in the standard envelope."""
    return JSONResponse(error_body(code, message, **extra), status_code=status, headers=headers)


async def _app_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, AppError)
    return error_response(exc.status_code, exc.code, exc.message, exc.headers)


def _clean_errors(errors: Any) -> list[dict[str, Any]]:
    """Validation details without echoing the (possibly large or secret) input back."""
    return [
        {"loc": list(err.get("loc", ())), "msg": err.get("msg", ""), "type": err.get("type", "")}
        for err in errors
    ]


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = _clean_errors(exc.errors())
    if any(err["type"] == "json_invalid" for err in errors):
        return error_response(400, "malformed_json", "The request body is not valid JSON.")
    first = errors[0] if errors else {"loc": [], "msg": "invalid request"}
    where = ".".join(str(part) for part in first["loc"] if part != "body") or "request"
    return error_response(422, "validation_error", f"{where}: {first['msg']}", details=errors)


_UNPARSEABLE_BODY = "There was an error parsing the body"


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = _STATUS_CODES.get(exc.status_code, "http_error")
    message = exc.detail if isinstance(exc.detail, str) else "Request failed."
    if exc.status_code == 400 and message == _UNPARSEABLE_BODY:
        # FastAPI's answer to a body json.loads could not read for another reason than a
        # syntax error (invalid UTF-8, nesting deeper than the parser's recursion limit).
        code, message = "malformed_json", "The request body is not valid JSON."
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        headers["Allow"] = ", ".join(_allowed_methods(request))
    return error_response(exc.status_code, code, message, headers)


_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def _allowed_methods(request: Request) -> list[str]:
    """Every method the path answers: the router's 405 names only those of the first route it
    matched, and each method of a path is a route of its own."""
    routes = request.app.router.routes
    return [
        method
        for method in _METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] == Match.FULL for route in routes
        )
    ]


INVALID_DATA = (
    "The request contains a value the database cannot store "
    "(for example a NUL character or an out-of-range number)."
)


def is_data_error(exc: DBAPIError) -> bool:
    """A value the database refused to store (SQLSTATE class 22, data exception: a NUL
    character in a text value, an out-of-range number): the client's input, not a fault."""
    return str(getattr(exc.orig, "sqlstate", "") or "").startswith("22")


async def _database_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, DBAPIError)
    if is_db_unavailable(exc):
        return await _database_unavailable(request, exc)
    sqlstate = str(getattr(exc.orig, "sqlstate", "") or "")
    if is_data_error(exc):
        return error_response(422, "invalid_data", INVALID_DATA)
    logger.error("database error", extra={"sqlstate": sqlstate}, exc_info=exc)
    return error_response(500, "internal_error", "Internal server error.")


async def _pool_exhausted(_: Request, exc: Exception) -> JSONResponse:
    logger.warning("database connection pool exhausted")
    return error_response(
        503,
        "database_busy",
        "The service is busy; retry shortly.",
        headers={"Retry-After": "1"},
    )


DB_RETRY_AFTER_SECONDS = 5


async def _database_unavailable(_: Request, exc: Exception) -> JSONResponse:
    logger.warning("database unavailable", extra={"error": type(exc).__name__})
    return error_response(
        503,
        "database_unavailable",
        "The database cannot be reached right now; retry shortly.",
        headers={"Retry-After": str(DB_RETRY_AFTER_SECONDS)},
    )


async def _connection_error(request: Request, exc: Exception) -> JSONResponse:
    """A refused or reset connection that escaped its client: asyncpg raises these raw when
    PostgreSQL is down (Redis and HTTP clients wrap theirs)."""
    if is_db_unavailable(exc):
        return await _database_unavailable(request, exc)
    logger.error("connection error", exc_info=exc)
    return error_response(500, "internal_error", "Internal server error.")


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers that render every error in the standard envelope."""
    app.add_exception_handler(AppError, _app_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(DBAPIError, _database_error)
    app.add_exception_handler(PoolTimeout, _pool_exhausted)
    app.add_exception_handler(ConnectionError, _connection_error)
    app.add_exception_handler(socket.gaierror, _connection_error)
