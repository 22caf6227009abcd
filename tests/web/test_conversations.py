"""Long conversations and the conversation list in a real browser: a 55-turn conversation
opens at its end and loads older turns on scrolling up; the list is grouped by date, scrolls
on without a button, and searches titles and turns on the server; a new chat is not stored
until its first message."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import httpx
from playwright.async_api import Page, expect
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

from app.config import Settings
from app.core.database_urls import resolve_database_urls
from app.core.db import scope_to_tenant
from app.models import ChatSession, QueryHistory
from tests.factories import make_tenant, make_user
from tests.web.conftest import World, api_login, screenshot, sign_in, watch_of


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


async def listed(world: World, email: str) -> list[str]:
    """The titles of the user's sessions, as the API lists them."""
    async with httpx.AsyncClient(base_url=world.url, timeout=30) as client:
        headers = await api_login(client, email)
        page = (await client.get("/sessions", params={"limit": 100}, headers=headers)).json()
    return [item["title"] for item in page["items"]]


async def test_new_chat_is_stored_only_with_its_first_message_titled_by_it(
    page: Page, world: World, test_database: Settings
) -> None:
    """Issue 28 item 5: every "New chat" click saved an empty "New conversation" row."""
    now = datetime.now(UTC)
    seeded = await seed(test_database, [("An older topic", now - timedelta(days=3), [])])
    await sign_in(page, world, seeded.email)
    await expect(page.locator(".conv-title")).to_have_text("An older topic")
    for _ in range(3):
        await page.click("text=New chat")
        await page.wait_for_url(lambda url: url.endswith("#/new"))
        await expect(page.locator(".conv-title")).to_have_text("New chat")
        await expect(page.locator("#message")).to_be_focused()
    await page.wait_for_timeout(300)
    assert await listed(world, seeded.email) == ["An older topic"]
    await expect(page.locator("button:has-text('Rename')")).to_be_hidden()

    await page.fill("#message", "What is the refund policy?")
    await page.keyboard.press("Enter")
    await page.wait_for_url(lambda url: "#/c/" in url)
    await expect(page.locator(".conv-title")).to_have_text("What is the refund policy?")
    await expect(page.locator(".turn:last-of-type")).not_to_have_attribute(
        "data-status", "pending", timeout=30_000
    )
    session_id = page.url.rsplit("/", 1)[-1]
    await expect(page.locator(f"a[href='#/c/{session_id}'][aria-current=page]")).to_contain_text(
        "What is the refund policy?"
    )
    assert await listed(world, seeded.email) == ["What is the refund policy?", "An older topic"]
    # A reload finds the conversation stored, with its turn.
    await page.reload()
    await expect(page.locator(".turn .question")).to_contain_text("What is the refund policy?")


async def test_the_list_is_grouped_by_date_scrolls_on_and_searches_turns(
    page: Page, world: World, test_database: Settings
) -> None:
    """Issue 28 item 5: no search, no date groups; more than a page needed a button."""
    now = datetime.now(UTC)
    # Five minutes ago, but never before midnight: the browser groups by its local day (this
    # machine's), and just after midnight five minutes ago was yesterday.
    midnight = datetime.now().astimezone().replace(hour=0, minute=0, second=0, microsecond=0)
    today_at = max(now - timedelta(minutes=5), midnight + timedelta(seconds=1))
    conversations: list[tuple[str, datetime, list[tuple[str, str]]]] = [
        (f"Old topic {i:02d}", now - timedelta(days=40 + 9 * i), []) for i in range(40)
    ]
    conversations += [
        ("Last month's topic", now - timedelta(days=15), []),
        (
            "Quarterly plan",
            now - timedelta(days=3),
            [("What do we grow?", "Mostly kumquats this year.")],
        ),
        ("Yesterday's topic", now - timedelta(days=1), []),
        ("Today's topic", today_at, [("Ask", "Answer")]),
    ]
    seeded = await seed(test_database, conversations)
    await sign_in(page, world, seeded.email)
    await expect(page.locator(".conv-title")).to_have_text("Today's topic")
    sidebar = page.locator("#sidebar")
    groups = sidebar.locator(".session-group-title")
    for label in ("Today", "Yesterday", "Previous 7 days", "Previous 30 days"):
        await expect(groups.filter(has_text=label)).to_have_count(1)
    await expect(groups.nth(0)).to_have_text("Today")
    await expect(sidebar.locator(".session-list li").first).to_contain_text("Today's topic")
    # Older than 30 days: one group a month, e.g. "March 2026" (or "March" this year).
    assert await groups.count() > 5
    await screenshot(page, "conversation-list")

    # Scrolling to the end of the list loads the next pages, no button pressed.
    items = sidebar.locator(".session-list li")
    await expect(items).to_have_count(20)
    for expected in (40, 44):
        await sidebar.evaluate("el => { el.scrollTop = el.scrollHeight; }")
        await expect(items).to_have_count(expected)
    await expect(items.last).to_contain_text("Old topic 39")

    # Search: titles and the text of turns, on the server.
    search = page.get_by_role("searchbox", name="Search conversations")
    await search.fill("KUMQUAT")
    await expect(items).to_have_count(1)
    await expect(items.first).to_contain_text("Quarterly plan")
    await screenshot(page, "conversation-search")
    await search.fill("no such thing anywhere")
    await expect(items).to_have_count(0)
    await expect(sidebar).to_contain_text("No conversation matches")
    await search.fill("")
    await expect(items).to_have_count(20)
    assert watch_of(page).errors == []


async def test_a_new_chat_shows_what_the_knowledge_base_covers_and_questions_to_ask(
    page: Page, world: World
) -> None:
    """Issue 28, deliver 1: a new chat shows what the knowledge base covers and suggested
    questions drawn from it (no model needed)."""
    await sign_in(page, world, world.member_email)
    await expect(page.locator("#message")).to_be_visible()
    await page.click("text=New chat")
    await page.wait_for_url(lambda url: url.endswith("#/new"))
    # Other tests add documents to the shared knowledge base: the page shows what the API says.
    async with httpx.AsyncClient(base_url=world.url, timeout=30) as client:
        headers = await api_login(client, world.member_email)
        overview = (await client.get("/kb/overview", headers=headers)).json()
    assert overview["documents"] >= 2
    welcome = page.locator(".welcome")
    await expect(welcome).to_contain_text(f"{overview['documents']} documents")
    await expect(welcome.locator(".topics li")).to_have_count(len(overview["topics"]))
    await expect(welcome.locator(".topics")).to_contain_text("Refund policy")
    # The hostile title is shown as text, never run.
    await expect(welcome.locator(".topics")).to_contain_text("<img src=x")
    questions = welcome.get_by_role("button")
    await expect(questions).to_have_text(overview["suggestions"])
    assert len(overview["suggestions"]) == min(3, len(overview["topics"]))  # no headings here
    await screenshot(page, "new-chat")
    await questions.filter(has_text="Refund policy").click()
    await page.wait_for_url(lambda url: "#/c/" in url)
    await expect(welcome).to_have_count(0)
    await expect(page.locator(".turn .question")).to_contain_text("What is “Refund policy” about?")
    await expect(page.locator(".conv-title")).to_have_text("What is “Refund policy” about?")
    await expect(page.locator(".turn:last-of-type")).not_to_have_attribute(
        "data-status", "pending", timeout=30_000
    )
    assert await page.evaluate("window.__xss") is None
    assert watch_of(page).dialogs == []
