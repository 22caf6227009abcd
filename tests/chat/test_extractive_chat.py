"""Issue 29, item 6, through /chat: without a model, "What is the refund window?" is
answered with the policy's sentence on refunds, cited (it used to find nothing: the
question says "refund", the policy "refunded")."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import Tenant
from tests.chat_helpers import ask
from tests.factories import login, make_knowledge_base, make_session, make_user

pytestmark = pytest.mark.committed

POLICY = (
    "Refunds for annual and monthly plans\n"
    "Annual plans can be refunded within 45 days of purchase.\n"
    "Monthly plans renew on the first day of each month."
)


async def test_the_default_responder_answers_the_refund_window_from_the_policy(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant_id = await make_knowledge_base(app, client, db, [("Refund policy", POLICY)])
    tenant = await db.get(Tenant, tenant_id)
    assert tenant is not None
    user = await make_user(db, tenant)
    chat = await make_session(db, user)
    response = await ask(client, await login(client, user), chat, "What is the refund window?")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["answer"] == (
        "Extractive answer (no language model is configured): "
        "Annual plans can be refunded within 45 days of purchase. [1]"
    )
    assert body["sources"][0]["title"] == "Refund policy"
