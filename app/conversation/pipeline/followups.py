"""Follow-up questions: detect them, and rewrite them into standalone retrieval queries.

"Tell me more about that one" cannot be searched for; "refund policy for damaged goods" can.
A question leans on the conversation when it refers back (a pronoun, an ordinal, a
correction, a return after a digression) or names nothing of its own ("What's the price?").
Rules work without a language model; with one, it writes the rewrite and the rules remain
the fallback.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from app.conversation.turn.types import ChatMessage, HistoryTurn
from app.core.text import content_words

_REFERRING = re.compile(
    r"\b(it|its|that|this|these|those|they|them|their|he|him|his|she|her|there|then|"
    r"the (?:first|second|third|fourth|fifth|last|other|former|latter|same)\b|"
    r"one|ones|more|else|also|too|elaborate|expand|why|how so|what about|how about|and)\b",
    re.IGNORECASE,
)
_CORRECTING = re.compile(
    r"^\W*(?:no\b|nope\b|sorry\b|i meant\b|i mean\b|actually\b|rather\b|not that\b)", re.I
)
_ORDINALS = {
    "first": 1,
    "1st": 1,
    "second": 2,
    "2nd": 2,
    "third": 3,
    "3rd": 3,
    "fourth": 4,
    "4th": 4,
    "fifth": 5,
    "5th": 5,
    "last": -1,
}
_WORDS = "|".join(_ORDINALS)
# An ordinal refers to an item of the answer only as a noun phrase ("the second", "the last
# one", "third option", "number 2"); as an adverb or adjective ("download it first", "last
# year") it refers to nothing.
_ORDINAL = re.compile(
    rf"\b(?:the|that|this)\s+({_WORDS})\b"
    rf"|\b({_WORDS})\s+(?:ones?|options?|points?|items?|steps?|documents?|sources?|bullets?)\b"
    r"|\b(?:number|no\.?|#)\s*(\d+)\b",
    re.I,
)
# A return after a digression: the question leaves the last topic for an earlier one. Only at
# the start of the question ("Going back to the panels, …", "Back to the card: …"), or as a
# reference to what was said before ("earlier you said …"): "send it back to me" returns to
# nothing.
_RETURNING = re.compile(
    r"^\W*(?:(?:and|so|ok|okay|now|but)\W+)?(?:(?:going|coming|getting|go|come|get)\s+)?"
    r"back\s+to\b"
    r"|^\W*(?:(?:and|so|ok|okay|now|but)\W+)?(?:returning|to\s+return)\s+to\b"
    r"|\b(?:earlier|before)\W+you\s+(?:said|mentioned|wrote)\b"
    r"|\byou\s+(?:said|mentioned|wrote)\s+(?:earlier|before)\b",
    re.I,
)
# Words that name no entity and no topic: an attribute, a quantity, a time, a stage or a step
# of *something* ("the price", "the end", "how long", "the first step"), the auxiliaries and
# quantifiers the shared stopword list leaves in, and verbs that say what happens to
# something without saying what. A short question made only of these names nothing it could
# be about, so it cannot be read on its own: "What's the price?" asks the price of what was
# just discussed. General English, grouped by kind; not a list of the dev set's questions.
_UNSPECIFIC = frozenset(
    word
    for kind in (
        # attributes and quantities
        "price prices cost costs fee fees charge charges rate rates amount amounts total number "
        "size limit limits maximum minimum max min length duration value worth difference "
        "much many enough less fewer least most ",
        # time and stages
        "time times long often soon quickly fast slow early late deadline date day days week "
        "weeks month months year years hour hours minute minutes period start starts beginning "
        "end ends first last next later earlier before after afterwards meanwhile ",
        # steps, rules, outcomes
        "step steps process procedure requirement requirements rule rules condition conditions "
        "option options alternative alternatives way ways reason reasons example examples "
        "detail details thing things part parts case cases result results outcome catch "
        "exception exceptions penalty penalties fine fines risk risks problem problems "
        "information info name kind type sort else instead otherwise ",
        # verbs that say nothing of what
        "have has had having get gets got getting go goes going happen happens happened "
        "work works take takes took make makes made put need needs want know mean means "
        "change changes changed begin begins stop stops last lasts keep keeps pay paid come "
        "comes apply applies count counts matter matters help use used do done ",
        # auxiliaries, quantifiers, connectives and contractions left in by the stopword list
        "must shall may might need if once each every all both other another own same "
        "still yet again ever now usually normally typically exactly roughly about "
        "over under until since during per up out off "
        "what's how's where's who's when's that's it's there's don't doesn't isn't aren't "
        "can't won't didn't i'm i've i'd we're we've you're",
    )
    for word in kind.split()
)

_LIST_ITEM = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+(.+)$", re.MULTILINE)
_STRIP_CITATIONS = re.compile(r"\s*\[\d+(?:\s*,\s*\d+)*\]")


def is_follow_up(query: str, history: Sequence[HistoryTurn]) -> bool:
    """A question that leans on earlier turns: an ordinal, a correction ("No, I meant …"), a
    return to an earlier topic ("Going back to …"), a short question with a referring word
    ("that", "it", "and …", "what about"), or one that names nothing (no content word at
    all, "why?", or only unspecific ones, "What's the price?")."""
    if not history:
        return False
    words = content_words(query.replace("\u2019", "'"))  # a typographic "What's" is one word
    if _ORDINAL.search(query) or _CORRECTING.search(query) or is_return(query):
        return True
    if not words or names_nothing(words):
        return True
    return bool(_REFERRING.search(query)) and len(words) <= 5


def names_nothing(words: Sequence[str]) -> bool:
    """A short question's content words name no entity and no topic: each is unspecific
    (an attribute, a time, a step: "price", "end", "how long", "first"), none a number or a
    name."""
    return 0 < len(words) <= 5 and all(w.lower() in _UNSPECIFIC for w in words)


def is_return(query: str) -> bool:
    """The question returns to an earlier topic ("Going back to …", "earlier you said …")."""
    return bool(_RETURNING.search(query))


def fold(word: str) -> str:
    """A word lowercased with a crude plural fold, so "moons" meets "moon"."""
    word = word.lower()
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


@lru_cache(maxsize=64)
def said_words(text: str) -> frozenset[str]:
    """The folded content words of a turn's text. Cached: every later turn of the session
    reads the same earlier turns again (the thread, the return's look back), and a long
    answer is the costly part. A miss (many sessions at once) costs only the reading the
    code did on every call before the cache."""
    return frozenset(fold(w) for w in content_words(text))


RETURN_REACH = 6
"""How many turns before the last one a return looks over for the turn it names: a return
goes back over a digression, not to the start of a long conversation (and the look stays
cheap: it reads each of those turns once)."""


def returns_to(query: str, history: Sequence[HistoryTurn]) -> int | None:
    """The index in `history` of the turn a return after a digression goes back to: of the
    `RETURN_REACH` turns before the last one, the one whose question and answer share the
    most of the question's words (the newest on a tie), else the one just before the
    digression. None when the question does not return, or nothing is before the last turn."""
    if len(history) < 2 or not is_return(query):
        return None
    named = _RETURNING.sub(" ", query)  # the cue's own words ("back", "said") name nothing
    words = {fold(w) for w in content_words(named) if w.lower() not in _UNSPECIFIC}
    best, best_shared = len(history) - 2, 0
    for index in range(len(history) - 2, max(-1, len(history) - 2 - RETURN_REACH), -1):
        turn = history[index]
        shared = len(words & (said_words(turn["user_query"]) | said_words(turn["answer"])))
        if shared > best_shared:
            best, best_shared = index, shared
    return best


def is_correction(query: str) -> bool:
    """The question corrects the previous one ("No, I meant …", "Sorry, for …")."""
    return bool(_CORRECTING.search(query))


def _ordinal(query: str) -> int | None:
    match = _ORDINAL.search(query)
    if match is None:
        return None
    word = match.group(1) or match.group(2)
    return _ORDINALS[word.lower()] if word else int(match.group(3))


def _items(answer: str) -> list[str]:
    """Enumerated items of an answer: list lines, else its sentences."""
    answer = _STRIP_CITATIONS.sub("", answer)
    items = [item.strip() for item in _LIST_ITEM.findall(answer)]
    if len(items) >= 2:
        return items
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", answer) if s.strip()]


def _lower(words: Sequence[str]) -> set[str]:
    return {w.lower() for w in words}


def rewrite_by_rules(
    query: str, history: Sequence[HistoryTurn], thread: Sequence[HistoryTurn] | None = None
) -> str:
    """A standalone query: the words of what the follow-up refers to (the listed item an
    ordinal points at, else the questions of `thread`, newest first: by default the last
    question, or for a return after a digression the turn it returns to), then the
    follow-up itself, verbatim — a rewrite adds context, it never drops the user's words."""
    if thread is None:
        target = returns_to(query, history)
        thread = [history[-1 if target is None else target]]
    own = _lower(content_words(query))
    ordinal = _ordinal(query)
    topic: list[str] = []
    if ordinal is not None:
        items = _items(thread[0]["answer"])
        index = ordinal - 1 if ordinal > 0 else len(items) - 1
        if 0 <= index < len(items):
            topic = content_words(items[index])[:12]
    if not topic:
        for turn in thread:
            topic += content_words(turn["user_query"])[:12]
    seen: set[str] = set()
    context = []
    for word in topic:
        if word.lower() not in own and word.lower() not in seen:
            seen.add(word.lower())
            context.append(word)
    return " ".join([*context, query.strip()]).strip()


def keep_user_words(rewrite: str, query: str) -> str:
    """The rewrite with every content word of the question it dropped appended, in order."""
    present = _lower(content_words(rewrite))
    dropped = [w for w in dict.fromkeys(content_words(query)) if w.lower() not in present]
    return " ".join([rewrite.strip(), *dropped]).strip()


def rewrite_prompt(query: str, history: Sequence[HistoryTurn]) -> list[ChatMessage]:
    """The model prompt that rewrites a follow-up into a standalone search query."""
    transcript = "\n".join(
        f"User: {turn['user_query']}\nAssistant: {turn['answer'][:600]}" for turn in history[-3:]
    )
    return [
        ChatMessage(
            role="system",
            content=(
                "Rewrite the user's last message into one standalone search query that can be "
                "understood without the conversation. Resolve pronouns and ordinals ('the "
                "second one') to what they refer to. Answer with the query only."
            ),
        ),
        ChatMessage(role="user", content=f"Conversation:\n{transcript}\n\nLast message: {query}"),
    ]
