"""Which known names (speakers, tools: an item's ``source``) a query mentions, tolerantly.

People write names the way they say them: a first name for a stored "Melanie Smith", no
accents for "José", "Carolin" for "Caroline", any case. A source counts as named when the
query holds, as whole words:

* its full name, case and diacritics aside (as before: "caroline", "CAROLINE", "Jose");
* the first word of a name of several words ("Melanie" for "Melanie Smith"), when the query
  writes it capitalized: a lower-case "new" must not name a source called "New York Times";
* a near spelling of a one-word name of five letters or more (one letter added, dropped or
  changed, the first letter kept), also only capitalized in the query.

A possessive ``'s`` is part of the word that names ("Melanie's"). :func:`name_words` gives
the query's words that named, so a dense query can be stripped of them.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable, Mapping

__all__ = ["APOSTROPHES", "NEAR_FROM", "WORD", "fold", "folded_words", "name_words", "named"]

APOSTROPHES = "'\u2019"
"""The apostrophes a possessive is written with (typed, and typographic)."""
WORD = re.compile(rf"\w+(?:[{APOSTROPHES}.-]\w+)*")
"""A word as names and aliases read it: letters and digits, joined across an inner apostrophe,
dot or hyphen ("Caroline's", "J.R.R", "Jean-Luc"); a dot or hyphen at its end is not its own
("Ask Jon." writes "Jon")."""
_POSSESSIVE = re.compile(rf"[{APOSTROPHES}]s$", re.IGNORECASE)
NEAR_FROM = 5
"""The shortest one-word name a near spelling may name (shorter ones collide with words)."""


def fold(text: str) -> str:
    """``text`` casefolded, its diacritics dropped ("José" and "jose" fold alike)."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def named(query: str, sources: Iterable[str]) -> frozenset[str]:
    """The known ``sources`` that ``query`` names (see the module)."""
    return frozenset(name_words(query, sources))


def name_words(query: str, sources: Iterable[str]) -> Mapping[str, tuple[str, ...]]:
    """Each source ``query`` names, with the query's words that name it (as written).

    The query is read once; a source is looked at closely only when the query holds its first
    word, or (one-word names) a capitalized word of the same initial: the few that can match
    among the hundreds of sources a store may know.
    """
    words = [(match.group(), _POSSESSIVE.sub("", match.group())) for match in WORD.finditer(query)]
    folded = [fold(bare) for _, bare in words]
    capital = [bare[:1].isupper() for _, bare in words]
    present = set(folded)
    initials = {word[:1] for word, upper in zip(folded, capital, strict=True) if upper}
    found: dict[str, tuple[str, ...]] = {}
    for source in sources:
        parts = folded_words(source)
        if not parts:
            continue
        if parts[0] not in present and not (
            len(parts) == 1 and len(parts[0]) >= NEAR_FROM and parts[0][:1] in initials
        ):
            continue
        spans = _spans(parts, folded, capital)
        if spans:
            found[source] = tuple(words[at][0] for start, end in spans for at in range(start, end))
    return found


@functools.lru_cache(maxsize=4096)
def folded_words(text: str) -> tuple[str, ...]:
    """``text``'s words (:data:`WORD`), folded, a possessive 's dropped.

    How a source's name or an alias term is compared. Cached: the same few names are asked
    about on every build.
    """
    return tuple(fold(_POSSESSIVE.sub("", part)) for part in WORD.findall(text))


def _spans(parts: tuple[str, ...], folded: list[str], capital: list[bool]) -> list[tuple[int, int]]:
    """Where the query's words name a source of these (folded) words."""
    size = len(parts)
    whole = [
        (at, at + size)
        for at in range(len(folded) - size + 1)
        if tuple(folded[at : at + size]) == parts
    ]
    if whole:
        return whole
    if size > 1:
        return [(at, at + 1) for at, word in enumerate(folded) if capital[at] and word == parts[0]]
    (name,) = parts
    if len(name) < NEAR_FROM:
        return []
    return [
        (at, at + 1)
        for at, word in enumerate(folded)
        if capital[at] and word[:1] == name[:1] and _one_edit(word, name)
    ]


def _one_edit(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` differ by at most one letter added, dropped or changed."""
    if abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        return sum(x != y for x, y in zip(a, b, strict=True)) <= 1
    short, long = (a, b) if len(a) < len(b) else (b, a)
    return any(long[:at] + long[at + 1 :] == short for at in range(len(long)))
