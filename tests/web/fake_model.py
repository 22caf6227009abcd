"""An OpenAI-compatible model on loopback for the browser tests, whose answer depends on the
question: it cites every source of its prompt, streams slowly when asked to, and returns
hostile Markdown when the question asks for it (the page must render it inert)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from tests.fake_llm_server import serve_model

XSS_ANSWER = (
    'Careful: <img src=x onerror="window.__xss=1;alert(1)"> and '
    "<script>window.__xss=2;alert(2)</script> and "
    "[click me](javascript:window.__xss=3;alert(3)) end"
)

# Every construct the page must render as the right element (tests/web/test_markdown.py).
MARKDOWN_ANSWER = """## Plans compared

| Plan | Refund window |
| --- | ---: |
| Annual | 14 days |
| Monthly | none |

- Level one
  - Level two
    - Level three
- Back to one

1. First step
2. Second step

- [x] Written request sent
- [ ] Refund received

```python
def refund_allowed(days):
    return days <= 14
```

Unsafe: [click me](javascript:window.__xss=8;alert(8)) and \
[the docs](https://elsewhere.example/docs) and <b>raw</b> tag"""


def long_answer(target: int = 27_000) -> str:
    """About `target` characters of the Markdown a model writes at length: headings,
    paragraphs, lists, a table and code, repeated section after section."""
    sections: list[str] = []
    n = 0
    while sum(len(s) for s in sections) < target:
        n += 1
        sections.append(
            f"## Part {n}: refunds in detail\n\n"
            f"Refunds are paid within **14 days** of a written request [1]. Section {n} "
            "restates it with *emphasis*, `inline code` and a [link](https://example.org/"
            f"{n}) so that the parser has inline work to do on every line of it.\n\n"
            "- Annual plans\n  - prorated by month\n  - paid to the original card\n"
            "- Monthly plans\n  - no refund after the first week\n\n"
            "| Plan | Window | Notes |\n| --- | --- | --- |\n"
            "| Annual | 14 days | prorated |\n| Monthly | 7 days | none |\n\n"
            f"```python\ndef refund_{n}(days):\n    return days <= 14\n```\n\n"
            "1. Write to support\n2. Wait for the answer\n3. Check the card\n\n"
        )
    return "".join(sections)


def answer_for(prompt: str) -> tuple[list[str], float]:
    """The answer's pieces and the delay between them, chosen by the question."""
    cited = "".join(f" [{n}]" for n in dict.fromkeys(re.findall(r"^\[(\d+)\] ", prompt, re.M)))
    question = prompt.rpartition("Question:")[2].lower()
    if "markdown fixture" in question:
        return [*MARKDOWN_ANSWER.splitlines(keepends=True), cited], 0.01
    if "hostile" in question:
        return [*(f"{w} " for w in XSS_ANSWER.split(" ")), cited.strip()], 0.01
    if "long answer" in question:
        text = long_answer()
        return [text[i : i + 90] for i in range(0, len(text), 90)], 0.02
    if "cite slowly" in question:
        return ["Per the sources", cited, ": ", *(f"part{i} " for i in range(120))], 0.1
    if "slowly" in question:
        return [f"part{i} " for i in range(120)], 0.1
    words = [f"word{i} " for i in range(24)]
    return ["Here is what the sources say", cited, ". ", *words], 0.04


@contextmanager
def fake_model() -> Iterator[str]:
    """Serve the fake model in a thread; yields its base URL (…/v1)."""
    with serve_model(answer_for) as url:
        yield url
