"""Long conversations and the conversation list in a real browser: a 55-turn conversation
opens at its end and loads older turns on scrolling up; the list is grouped by date, scrolls
on without a button, and searches titles and turns on the server; a new chat is not stored
until its first message."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from playwright.async_api import Page, expect
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

from app.config import Settings
from app.core.database_urls import resolve_database_urls
from app.core.db import scope_to_tenant
from app.models import ChatSession, QueryHistory
from tests.factories import make_tenant, make_user
from tests.web.conftest import World, screenshot, sign_in


@dataclass
class Seeded:
    email: str
    sessions: list[str]


async def seed(
    settings: Settings, conversations: list[tuple[str, datetime, list[tuple[str, str]]]]
) -> Seeded:
    """A new user (in a tenant of their own) with these conversations: (title, started,
    [(question, answer), ...]), each turn a minute after the one before."""
    engine = create_async_engine(resolve_database_urls(settings).app)
    ids: list[str] = []
    async with AsyncSession(engine, expire_on_commit=False) as db:
        user = await make_user(db, await make_tenant(db))
        await scope_to_tenant(db, user.tenant_id)
        for title, started, turns in conversations:
            chat = ChatSession(
                tenant_id=user.tenant_id,
                user_id=user.id,
                title=title,
                created_at=started,
                updated_at=started + timedelta(minutes=len(turns)),
            )
            db.add(chat)
            await db.flush()
            ids.append(str(chat.id))
            for i, (question, answer) in enumerate(turns):
                db.add(
                    QueryHistory(
                        tenant_id=user.tenant_id,
                        session_id=chat.id,
                        user_id=user.id,
                        user_query=question,
                        answer=answer,
                        status="complete",
                        query_composition="chat",
                        created_at=started + timedelta(minutes=i),
                    )
                )
        await db.commit()
    await engine.dispose()
    return Seeded(user.email, ids)


async def test_a_long_conversation_opens_at_its_end_and_loads_older_turns_upwards(
    page: Page, world: World, test_database: Settings
) -> None:
    """Issue 28 item 7: a 55-turn conversation opened at turn 6 with "Older turns are not
    shown" and no way to load them."""
    started = datetime.now(UTC) - timedelta(hours=2)
    turns = [(f"Question number {i}?", f"Answer number {i}.") for i in range(55)]
    seeded = await seed(test_database, [("A long one", started, turns)])
    await sign_in(page, world, seeded.email)
    await page.goto(f"{world.url}/#/c/{seeded.sessions[0]}")
    view = page.locator(".turns")
    last = page.locator(".turn .question", has_text="Question number 54?")
    await expect(last).to_be_visible()
    await expect(last).to_be_in_viewport()
    # At the end: nothing below the last turn.
    gap = await view.evaluate("el => el.scrollHeight - el.scrollTop - el.clientHeight")
    assert gap < 4, gap
    await expect(page.get_by_text("Older turns are not shown")).to_have_count(0)

    # Scrolling up reaches every turn, each once and in order, without jumping to the top.
    first = page.locator(".turn .question", has_text="Question number 0?")
    for _ in range(10):
        if await first.count():
            break
        shown = await page.locator(".turn").count()
        await view.evaluate("el => { el.scrollTop = 0; }")
        await expect(page.locator(".turn")).not_to_have_count(shown)
        # The turns came in above what was read: the view did not stay at the very top.
        assert await view.evaluate("el => el.scrollTop") > 0
    questions = await page.locator(".turn .question").all_inner_texts()
    assert [q.split("You asked:")[-1].strip() for q in questions] == [q for q, _ in turns]
    await view.evaluate("el => { el.scrollTop = 0; }")
    await screenshot(page, "long-conversation-top")
