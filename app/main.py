"""The ASGI application: middleware, error handlers and routers. No logic lives here."""

from __future__ import annotations

from fastapi import FastAPI
from starlette.middleware.gzip import GZipMiddleware

from app.attachments.endpoints import router as attachments_router
from app.audit.endpoints import router as audit_router
from app.auth.endpoints import admin_router as admin_auth_router
from app.auth.endpoints import router as auth_router
from app.auth.principal import authenticate, require_admin
from app.collections.endpoints import router as collections_router
from app.config import Settings, get_settings
from app.conversation.endpoints.chat import router as chat_router
from app.conversation.endpoints.sessions import router as sessions_router
from app.core.deps import get_db, get_sessionmaker
from app.core.errors import install_error_handlers
from app.core.hosts import HostMiddleware
from app.core.in_flight import InFlightPerCredentialMiddleware
from app.core.logging import configure_logging
from app.core.middleware import (
    BodySizeLimitMiddleware,
    ClientAddressMiddleware,
    ContentTypeMiddleware,
    RequestContextMiddleware,
)
from app.core.openapi import document_errors
from app.faqs.endpoints import router as faqs_router
from app.feedback.endpoints import router as feedback_router
from app.groups.endpoints import router as groups_router
from app.guardrails.endpoints import router as guardrails_router
from app.kb_inspect.endpoints import router as kb_inspect_router
from app.knowledge.endpoints import router as knowledge_router
from app.knowledge.languages.endpoints import router as tenant_settings_router
from app.lifespan import lifespan
from app.mcp_server.server import install_mcp
from app.observability.endpoints import router as metrics_router
from app.openai_compat.endpoints import router as openai_router
from app.openai_compat.errors import OpenAIErrorMiddleware
from app.ops.endpoints import router as ops_router
from app.privacy.endpoints import router as privacy_router
from app.retention.endpoints import router as retention_router
from app.sso.endpoints import admin_router as sso_admin_router
from app.sso.endpoints import router as sso_router
from app.users.endpoints import router as users_router
from app.web import install_web

UPLOAD_PATHS = ("/attachments", "/kb/documents")


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the FastAPI application: middleware, error handlers, routers."""
    settings = settings or get_settings()
    app = FastAPI(
        title="Threadline",
        summary="Multi-tenant RAG chat over your organisation's knowledge base.",
        version="0.1.0",
        lifespan=lifespan,
        docs_url=None,  # /docs and /redoc come from app.web, on vendored assets
        redoc_url=None,
    )
    app.state.settings = settings
    install_error_handlers(app)
    app.add_middleware(ContentTypeMiddleware)
    app.add_middleware(
        BodySizeLimitMiddleware,
        max_bytes=settings.max_body_bytes,
        overrides=[(path, settings.max_upload_bytes) for path in UPLOAD_PATHS],
    )
    app.add_middleware(ClientAddressMiddleware, trusted_proxies=settings.trusted_proxies)
    # Before authentication's database work: one caller's burst is refused cheaply.
    app.add_middleware(InFlightPerCredentialMiddleware, limit=settings.max_in_flight_per_credential)
    app.add_middleware(
        HostMiddleware, allowed_hosts=settings.allowed_hosts, hsts_seconds=settings.hsts_seconds
    )
    app.add_middleware(RequestContextMiddleware)  # every response gets an id
    app.add_middleware(OpenAIErrorMiddleware)  # any error under /v1 in OpenAI's shape
    # Outermost, so it compresses what every other middleware wrote (an error rewritten under
    # /v1 was sent with the inner compression's header over a plain body). Per request for
    # the API's answers; the web app's files come compressed once (app.web.assets), which this
    # leaves alone, as it does event streams.
    app.add_middleware(GZipMiddleware, minimum_size=500, compresslevel=6)
    for router in (
        ops_router,
        metrics_router,
        auth_router,
        admin_auth_router,
        users_router,
        sessions_router,
        chat_router,
        feedback_router,
        attachments_router,
        knowledge_router,
        kb_inspect_router,
        groups_router,
        collections_router,
        faqs_router,
        guardrails_router,
        tenant_settings_router,
        privacy_router,
        audit_router,
        retention_router,
        sso_router,
        sso_admin_router,
        openai_router,
    ):
        app.include_router(router)
    app.router.lifespan_context = install_mcp(app, lifespan)  # /mcp, and its session manager
    install_web(app)
    # What a route depends on says what it may answer: a database (the request's transaction,
    # or a service's own from the sessionmaker) may be unavailable.
    document_errors(
        app,
        {authenticate: (401, 429), require_admin: (403,), get_db: (503,), get_sessionmaker: (503,)},
    )
    return app


def app_factory() -> FastAPI:
    """Entry point for `uvicorn --factory app.main:app_factory`."""
    settings = get_settings()
    configure_logging(settings.log_level, settings.log_json)
    app = create_app(settings)
    app.state.serving_process = True  # this process ends with the server: detach at shutdown
    return app
