"""How an answer presents its sources and how it was built (issue 28 item 9): titles people
gave the documents, snippets cut at a word, relevance as a rank and a bar, uncited sources
folded, no Sources button when nothing answered, and the drawer's truth about the route."""

from __future__ import annotations

from typing import Any

from playwright.async_api import Page, expect

from tests.web.conftest import World, screenshot, sign_in

SOURCES = [
    {
        "n": 1,
        "id": "c1",
        "kind": "kb",
        "source_id": "d1",
        "title": "data-and-privacy.md",
        "score": -1.2345,
        "tokens": 80,
        "snippet": "# Your data and privacy\n\nYou can download everything you said with the "
        "export, and erase it all; the administrators keep the audit until the retentio…",
        "location": {"page": 3, "page_end": 4, "section": "Your data \u203a Export"},
    },
    {
        "n": 2,
        "id": "c2",
        "kind": "kb",
        "source_id": "d2",
        "title": "getting-started.md",
        "score": -3.5,
        "tokens": 60,
        "snippet": "Sign in with the e-mail your administrator used.",
    },
    {
        "n": 3,
        "id": "c3",
        "kind": "kb",
        "source_id": "d3",
        "title": "Refund policy",
        "score": -7.25,
        "tokens": 40,
        "snippet": "Refunds are paid within 14 days.",
    },
]


def extractive_turn(answer: str, cited: list[int]) -> dict[str, Any]:
    return {
        "id": f"t-{len(cited)}",
        "user_query": "How do I download my data?",
        "answer": answer,
        "status": "complete",
        "query_composition": "kb",
        "context_metadata": {
            "model": "extractive",
            "triage": {"route": "llm", "skip_llm": False},
            "citations": {"cited": cited, "removed_invalid": 0},
            "sources": SOURCES,
            "token_count": 420,
            "token_budget": 1600,
            "source_distribution": {"kb": 300, "attachment": 0, "history": 0},
        },
    }


SHOW = """async (turn) => {
    const base = document.querySelector('script[type=module]').src.replace(/main\\.js$/, '');
    const { turnView } = await import(base + 'turns.js');
    const view = turnView(turn);
    document.querySelector('.turns').append(view.el);
}"""


async def test_sources_show_titles_snippets_and_ranks_and_the_drawer_the_route(
    page: Page, world: World
) -> None:
    await sign_in(page, world, world.member_email)
    await expect(page.locator("#message")).to_be_visible()
    nothing = extractive_turn(
        "Extractive answer (no language model is configured): I found nothing in the "
        "knowledge base or the attached documents that answers this.",
        [],
    )
    await page.evaluate(SHOW, nothing)
    turn = page.locator("article[data-turn-id='t-0']")
    await expect(turn.locator(".answer")).to_contain_text("I found nothing")
    await expect(turn.get_by_role("button", name="How this answer was built")).to_be_visible()
    await expect(turn.get_by_role("button", name="Sources")).to_be_hidden()

    answered = extractive_turn(
        "Extractive answer (no language model is configured): You can download everything "
        "you said with the export. [1]",
        [1],
    )
    await page.evaluate(SHOW, answered)
    turn = page.locator("article[data-turn-id='t-1']")
    await turn.get_by_role("button", name="Sources (1)").click()
    panel = page.locator("#panel")
    cited = panel.locator("ol.sources").first.locator(".source")
    await expect(cited).to_have_count(1)
    await expect(cited.locator("strong")).to_have_text("Your data and privacy")
    await expect(cited.locator(".relevance")).to_have_attribute(
        "aria-label", "Relevance: rank 1 of 3"
    )
    # Where the passage is (issue 29), only for a source that knows it.
    await expect(cited.locator(".location")).to_have_text("p. 3\u20134 · Your data \u203a Export")
    await expect(panel.locator(".location")).to_have_count(1)
    snippet = await cited.locator(".snippet").inner_text()
    assert snippet.strip().endswith("until the …"), snippet  # "retentio…" cut at its word
    assert "#" not in snippet
    text = await panel.inner_text()
    assert "-1.2" not in text and "-3.5" not in text and "score" not in text, text
    fold = panel.locator("details.also")
    await expect(fold.locator("summary")).to_have_text("Also retrieved (2), not cited")
    await expect(fold.locator(".source").first).to_be_hidden()  # folded
    await fold.locator("summary").click()
    await expect(fold.locator(".source strong")).to_have_text(["Getting started", "Refund policy"])
    await screenshot(page, "chat-sources-ranked")
    await page.keyboard.press("Escape")

    await turn.get_by_role("button", name="How this answer was built").click()
    drawer = page.locator("#panel .build")
    await expect(drawer).to_contain_text("extractive responder")
    await expect(drawer).not_to_contain_text("llm")
    bar = drawer.locator(".token-bar[role=meter]")
    await expect(bar).to_have_attribute("aria-valuenow", "420")
    await expect(bar).to_have_attribute("aria-valuemax", "1600")
    await expect(drawer).to_contain_text("420 of 1600 tokens (26 %)")
    await screenshot(page, "chat-build-drawer")
