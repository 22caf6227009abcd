"""Searches are rate limited per user (issue 33, item 10): `/kb/search` and MCP's
`search_knowledge` count against the same minute, and one user's searches leave another's."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.principal import Principal
from app.core.errors import TooManyRequests
from app.mcp_server.tools import Toolbox
from tests.factories import login, make_tenant, make_user


async def test_a_user_searches_only_so_often_a_minute_over_http_and_mcp(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    resources = app.state.resources
    settings = resources.settings
    resources.settings = settings.model_copy(update={"rate_limit_search_per_min": 3})
    resources.turn_context.settings = resources.settings
    try:
        tenant = await make_tenant(db)
        searcher, other = await make_user(db, tenant), await make_user(db, tenant)
        me = await login(client, searcher)
        statuses = [
            (await client.post("/kb/search", json={"query": "x"}, headers=me.headers)).status_code
            for _ in range(3)
        ]
        assert statuses == [200, 200, 200]
        refused = await client.post("/kb/search", json={"query": "x"}, headers=me.headers)
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == "rate_limited"
        assert 1 <= int(refused.headers["retry-after"]) <= 61

        toolbox = Toolbox(
            principal=Principal(searcher.id, tenant.id, searcher.email, "member", "api_key"),
            chat=None,  # type: ignore[arg-type]  # search needs no chat service
            transactions=resources.turn_context.transactions,
            settings=resources.turn_context.settings,
            retriever=resources.retriever,
            redis=resources.redis,
        )
        with pytest.raises(TooManyRequests):
            await toolbox.search_knowledge("x", 3)

        someone_else = await login(client, other)
        answered = await client.post(
            "/kb/search", json={"query": "x"}, headers=someone_else.headers
        )
        assert answered.status_code == 200
    finally:
        resources.settings = settings
        resources.turn_context.settings = settings
