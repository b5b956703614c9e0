"""Cutting text to a number of tokens, at a word boundary, with the counter that will count it.

A token counter only says how many tokens a text costs, not where its tokens start, so a
cut "at a token boundary" is the longest prefix made of whole words (whitespace-separated
runs) whose count, with a visible mark after it, is within the limit: found by halving,
a few counts of short texts. A first word too long for the limit alone (a URL, a run of
text without spaces) is cut between its characters instead, so a limit that holds any text
at all gets some. The summary step uses it twice: the extractive summarizer fills its
allowance with it, and the assembler cuts any summarizer's answer to the room left.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["CUT_MARK", "cut"]

CUT_MARK = " …"
"""What follows a cut text: says that it goes on (a token with the default counter)."""

_WORD = re.compile(r"\S+\s*")


def cut(text: str, tokens: int, count: Callable[[str], int], *, mark: str = CUT_MARK) -> str:
    """``text`` if it counts ``tokens`` or fewer, else its longest fitting prefix and ``mark``.

    ``count`` is what the limit is measured with (the text alone, or the text inside what
    surrounds it). The prefix ends at a word boundary (its trailing whitespace dropped), or
    inside the first word when no whole word fits. Empty when not even one character does.
    """
    if count(text) <= tokens:
        return text
    words = _WORD.findall(text)
    best = _longest(len(words) - 1, lambda n: "".join(words[:n]).rstrip() + mark, tokens, count)
    if best:
        return best
    first = words[0].rstrip() if words else ""
    return _longest(len(first), lambda n: first[:n] + mark, tokens, count)


def _longest(
    size: int, prefix: Callable[[int], str], tokens: int, count: Callable[[str], int]
) -> str:
    """The longest ``prefix(n)``, ``n`` in ``1..size``, that counts ``tokens`` at most ('' if none).

    Halving assumes that a longer prefix never counts fewer tokens, which holds for the
    default counter and closely for a tokenizer; whatever is returned was counted and fits.
    """
    best = ""
    low, high = 1, size
    while low <= high:
        middle = (low + high) // 2
        candidate = prefix(middle)
        if count(candidate) <= tokens:
            best, low = candidate, middle + 1
        else:
            high = middle - 1
    return best
