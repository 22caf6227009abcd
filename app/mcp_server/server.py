"""The MCP server at `/mcp`: Threadline's knowledge and sessions as tools, over streamable
HTTP, built with the official SDK (`mcp`, its `MCPServer`).

Stateless, JSON responses (docs/adr/0038-openai-and-mcp-faces.md): each POST carries one
JSON-RPC message and gets one JSON answer, with no MCP session held in this process, so any
API process answers any request and nothing is lost on a restart; Threadline's own state
(sessions, turns) is in PostgreSQL anyway. Each request is authenticated with an API key
(app/mcp_server/auth.py), and every tool acts as that key's user in its tenant.

An argument of the wrong type or out of bounds is refused by the SDK against the tool's
schema before the tool runs; a Threadline error (an unknown or foreign session: not found;
a member asking for the audit: admin required) is a tool error naming its code.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from typing import Annotated, Any, TypeVar

from fastapi import FastAPI
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import ToolAnnotations
from pydantic import Field, ValidationError
from sqlalchemy.exc import DBAPIError
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from app.audit.schemas import AuditTurnRecord
from app.conversation.endpoints.deps import get_chat_service
from app.conversation.endpoints.session_schemas import SessionPage, TurnPage
from app.conversation.turn.schemas import MAX_MESSAGE_CHARS
from app.core.errors import INVALID_DATA, AppError, error_response, is_data_error
from app.knowledge.schemas import SearchOut
from app.mcp_server.auth import ApiKeyGate, principal_of
from app.mcp_server.tools import Answer, Toolbox

# Not blank (NUL is the database's 422 `invalid_data`, which the tools report as such).
NOT_BLANK = r"\S"

PATH = "/mcp"
INSTRUCTIONS = (
    "Threadline answers questions from an organisation's knowledge base, with cited sources, "
    "and keeps each conversation as a session. Use `ask` for an answer (it is stored in the "
    "caller's session history), `search_knowledge` for raw passages, `list_sessions` and "
    "`get_session_turns` to read earlier conversations."
)
T = TypeVar("T")
Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]

SessionId = Annotated[
    uuid.UUID, Field(description="A session id (UUID) from `ask` or `list_sessions`.")
]
Limit = Annotated[int, Field(ge=1, le=100, description="How many items, at most (1-100).")]
Cursor = Annotated[
    str | None,
    Field(max_length=200, description="`next_cursor` of the previous page; omit for the first."),
]
_READ = ToolAnnotations(readOnlyHint=True, openWorldHint=False)


async def _toolbox(ctx: Context) -> Toolbox:
    request = ctx.request_context.request
    assert isinstance(request, Request), "streamable HTTP carries the request"
    resources = request.app.state.resources
    return Toolbox(
        principal=principal_of(request),
        chat=await get_chat_service(request),
        transactions=resources.turn_context.transactions,
        settings=resources.settings,
        retriever=resources.retriever,
        redis=resources.redis,
    )


async def _run(ctx: Context, call: Callable[[Toolbox], Awaitable[T]]) -> T:
    """Run a tool for the request's caller; Threadline's errors become tool errors."""
    try:
        return await call(await _toolbox(ctx))
    except AppError as exc:
        raise ToolError(f"{exc.message} ({exc.code})") from None
    except DBAPIError as exc:
        if is_data_error(exc):  # a NUL character in a query, as `/kb/search` says with 422
            raise ToolError(f"{INVALID_DATA} (invalid_data)") from None
        raise


@contextmanager
def _root_logger_untouched() -> Iterator[None]:
    """MCPServer's constructor calls `logging.basicConfig`, which would configure the root
    logger of a process that has not yet done so (a test, a bench): logging is the app's own
    (app/core/logging.py). A handler held meanwhile makes that call a no-op."""
    root = logging.getLogger()
    placeholder = logging.NullHandler()
    root.addHandler(placeholder)
    try:
        yield
    finally:
        root.removeHandler(placeholder)


class _ThreadlineServer(MCPServer):
    """MCPServer whose argument errors name the field and the rule, never the value: the
    SDK's message is pydantic's whole text (`input_value=…`), and a rejected value is the
    caller's data, as the REST API's validation details say (app/core/errors.py)."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc, UnexpectedToolError) or not isinstance(
                exc.__cause__, ValidationError
            ):
                raise
            problems = "; ".join(
                f"{'.'.join(str(part) for part in error['loc']) or 'arguments'}: {error['msg']}"
                for error in exc.__cause__.errors(include_input=False, include_url=False)
            )
            raise ToolError(f"Invalid arguments for {name}: {problems}") from exc.__cause__


@functools.cache
def build_server() -> MCPServer:
    """The MCP server and its tools, once a process: the tools read the application from the
    request and each lifespan runs its own session manager, so every application shares it
    (building the tools' models took ~50 ms of each `create_app`, of each test's set-up)."""
    with _root_logger_untouched():
        server: MCPServer = _ThreadlineServer(
            "threadline", instructions=INSTRUCTIONS, version="0.1.0"
        )

    @server.tool(
        description="Search the organisation's knowledge base (the same hybrid dense + "
        "keyword search the assistant answers from). Returns the best-matching passages, "
        "best first, each with its document id, chunk id, title, relevance score and a "
        "snippet. Use it to find documents; use `ask` for an answer.",
        annotations=_READ,
    )
    async def search_knowledge(
        query: Annotated[
            str,
            Field(
                min_length=1,
                max_length=4000,
                pattern=NOT_BLANK,
                description="What to look for, in natural language or keywords.",
            ),
        ],
        ctx: Context,
        k: Annotated[int, Field(ge=1, le=50, description="How many passages (1-50).")] = 5,
    ) -> SearchOut:
        return await _run(ctx, lambda tools: tools.search_knowledge(query, k))

    @server.tool(
        description="Ask Threadline's assistant a question. It answers from the knowledge "
        "base, citing its sources as [n] (listed in `sources`), and stores the exchange as "
        "a turn of a session: pass `session_id` to continue a conversation (follow-up "
        "questions are understood in its context); without it a new session is started "
        "and its id returned.",
        annotations=ToolAnnotations(readOnlyHint=False, openWorldHint=False),
    )
    async def ask(
        question: Annotated[
            str,
            Field(
                min_length=1,
                max_length=MAX_MESSAGE_CHARS,
                pattern=NOT_BLANK,
                description="The question, as the user would ask it.",
            ),
        ],
        ctx: Context,
        session_id: Annotated[
            uuid.UUID | None,
            Field(description="The session to continue (UUID); omit to start a new one."),
        ] = None,
    ) -> Answer:
        return await _run(ctx, lambda tools: tools.ask(question, session_id))

    @server.tool(
        description="List the caller's chat sessions, newest first (id, title, created and "
        "updated times), a page at a time.",
        annotations=_READ,
    )
    async def list_sessions(ctx: Context, limit: Limit = 20, cursor: Cursor = None) -> SessionPage:
        return await _run(ctx, lambda tools: tools.list_sessions(limit, cursor))

    @server.tool(
        description="The turns of one of the caller's sessions, newest first: each question, "
        "answer, status and how its context was built. Another user's session is not found.",
        annotations=_READ,
    )
    async def get_session_turns(
        session_id: SessionId, ctx: Context, limit: Limit = 20, cursor: Cursor = None
    ) -> TurnPage:
        return await _run(ctx, lambda tools: tools.session_turns(session_id, limit, cursor))

    @server.tool(
        description="Admins only: the full audit record of one turn of the tenant (question, "
        "answer, model, token counts and the context manifest: which history, passages and "
        "attachments went into the prompt, within which budget). The read is itself logged "
        "in the audit log.",
        annotations=_READ,
    )
    async def audit_turn(
        turn_id: Annotated[uuid.UUID, Field(description="The turn's id (UUID).")], ctx: Context
    ) -> AuditTurnRecord:
        return await _run(ctx, lambda tools: tools.audit_turn(turn_id))

    return server


class McpEndpoint:
    """The ASGI endpoint at `/mcp`: the running session manager's request handler.

    A session manager runs once; each run of the application's lifespan (a test may run
    several, even nested) starts a fresh one, and the innermost running one answers.
    """

    def __init__(self, server: MCPServer) -> None:
        self.server = server
        self.running: list[StreamableHTTPSessionManager] = []

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """A new session manager, running until the block ends.

        It runs in a task of its own: its anyio task group must end in the task that began
        it, and a lifespan may be entered and left in different tasks (a test fixture's
        setup and teardown are)."""
        self.server.streamable_http_app(
            stateless_http=True,
            json_response=True,
            # Callers authenticate with an API key, never a cookie: the DNS-rebinding check
            # (meant for unauthenticated local servers) would only refuse the API's hosts.
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        manager = self.server.session_manager
        started, stop = asyncio.Event(), asyncio.Event()

        async def serve() -> None:
            async with manager.run():
                started.set()
                await stop.wait()

        task = asyncio.create_task(serve(), name="mcp-session-manager")
        waiting = asyncio.create_task(started.wait())
        await asyncio.wait((task, waiting), return_when=asyncio.FIRST_COMPLETED)
        if not started.is_set():
            waiting.cancel()
            await task  # it ended before it started: its error is the lifespan's
            raise RuntimeError("the MCP session manager ended before it started")
        self.running.append(manager)
        try:
            yield
        finally:
            self.running.remove(manager)
            stop.set()
            await task

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.running:
            failed = error_response(503, "mcp_unavailable", "The MCP server is not running.")
            await failed(scope, receive, send)
            return
        await self.running[-1].handle_request(scope, receive, send)


def install_mcp(app: FastAPI, lifespan: Lifespan) -> Lifespan:
    """Route `/mcp` to the MCP server (behind the API-key gate); returns `lifespan` extended
    to run the server's session manager while the application runs."""
    endpoint = McpEndpoint(build_server())
    app.router.routes.append(
        Route(
            PATH,
            endpoint=ApiKeyGate(endpoint),
            # No GET: a stateless server has no stream of its own to offer, and the GET
            # stream the transport would open is never fed; the specification's answer for
            # such a server is 405 (JSON here, with `Allow`).
            methods=["POST", "DELETE"],
            include_in_schema=False,
        )
    )

    @asynccontextmanager
    async def with_mcp(application: FastAPI) -> AsyncIterator[None]:
        async with lifespan(application), endpoint.run():
            yield

    return with_mcp
