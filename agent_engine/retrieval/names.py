"""Which known names (speakers, tools: an item's ``source``) a query mentions, tolerantly.

People write names the way they say them: a first name for a stored "Melanie Smith", no
accents for "José", "Carolin" for "Caroline", "Mel" for "Melanie" (or the other way round:
a chat labels its speaker "Mel" and the questions ask about "Melanie"), any case. A source
counts as named when the query holds, as whole words:

* its full name, case and diacritics aside (as before: "caroline", "CAROLINE", "Jose");
* the first word of a name of several words ("Melanie" for "Melanie Smith"), when the query
  writes it capitalized: a lower-case "new" must not name a source called "New York Times";
* a near spelling of a name's first word of five letters or more (one letter added, dropped
  or changed, the first letter kept), also only capitalized in the query;
* a short form of a name's first word, or the name of which the first word is a short form,
  also only capitalized: a name of three to five letters that begins the other ("Mel" and
  "Melanie", "Chris" and "Christopher"), or does so once a pet-name ending is dropped
  ("Katie" and "Kate" for "Katherine", "Jenny" for "Jennifer", "Danny" for "Daniel").

The closest reading wins, word by word: a word that writes a known name exactly names that
source only, and a word that near-spells one is not also read as a short form of another. So
with speakers "Mel" and "Melanie" each is named by its own name. A capitalized word that
merely begins like a short name ("Melbourne" with a speaker "Mel") reads as that name when
no closer reading exists: the price of reading "Melanie" as "Mel". A name no rule can guess
("Bob" for "Robert") is an alias's (:mod:`agent_engine.retrieval.aliases`).

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
"""The shortest name a near spelling may name (shorter ones collide with words)."""
SHORT_FORMS = range(3, 6)
"""How long a short form of a name is: "Mel" to "Chris" (shorter ones collide with words)."""
_PET_ENDINGS = ("ie", "y", "i", "e")
"""Endings a short form may add to the letters it keeps ("Katie", "Jenny", "Dani", "Kate")."""


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
    word, or a capitalized word of the same initial: the few that can match among the
    hundreds of sources a store may know. Exact readings come first, then near spellings,
    then short forms, each only on the words no closer reading took (see the module).
    """
    words = [(match.group(), _POSSESSIVE.sub("", match.group())) for match in WORD.finditer(query)]
    folded = [fold(bare) for _, bare in words]
    capital = [bare[:1].isupper() for _, bare in words]
    present = set(folded)
    initials = {word[:1] for word, upper in zip(folded, capital, strict=True) if upper}
    names = [(source, parts) for source in sources if (parts := folded_words(source))]
    found: dict[str, list[int]] = {}
    for source, parts in names:
        if parts[0] in present and (at := _exact(parts, folded, capital)):
            found[source] = at
    taken = {at for ats in found.values() for at in ats}
    for reads in (_near, _short_form):
        loose = [at for at, upper in enumerate(capital) if upper and at not in taken]
        for source, parts in names:
            if source in found or parts[0][:1] not in initials:
                continue
            at = [at for at in loose if reads(folded[at], parts[0])]
            if at:
                found[source] = at
                taken.update(at)
    return {source: tuple(words[at][0] for at in ats) for source, ats in found.items()}


@functools.lru_cache(maxsize=4096)
def folded_words(text: str) -> tuple[str, ...]:
    """``text``'s words (:data:`WORD`), folded, a possessive 's dropped.

    How a source's name or an alias term is compared. Cached: the same few names are asked
    about on every build.
    """
    return tuple(fold(_POSSESSIVE.sub("", part)) for part in WORD.findall(text))


def _exact(parts: tuple[str, ...], folded: list[str], capital: list[bool]) -> list[int]:
    """The query's words that write a source's (folded) name: whole, or its first word.

    The whole name in any case; else, for a name of several words, its first word written
    capitalized.
    """
    size = len(parts)
    whole = [
        at + n
        for at in range(len(folded) - size + 1)
        if tuple(folded[at : at + size]) == parts
        for n in range(size)
    ]
    if whole or size == 1:
        return whole
    return [at for at, word in enumerate(folded) if capital[at] and word == parts[0]]


def _near(word: str, name: str) -> bool:
    """Whether ``word`` is a near spelling of ``name`` (see the module)."""
    return len(name) >= NEAR_FROM and word[:1] == name[:1] and _one_edit(word, name)


def _short_form(word: str, name: str) -> bool:
    """Whether one of ``word`` and ``name`` is a short form of the other (see the module)."""
    short, long = (word, name) if len(word) < len(name) else (name, word)
    if len(short) == len(long) or len(short) not in SHORT_FORMS:
        return False
    return any(len(kept) >= SHORT_FORMS.start and long.startswith(kept) for kept in _kept(short))


def _kept(short: str) -> list[str]:
    """The letters a short form keeps of a name: all, or all but a pet-name ending.

    A doubled letter before the ending stands for one ("Danny" keeps "Dan").
    """
    kept = [short]
    for ending in _PET_ENDINGS:
        if short.endswith(ending):
            stem = short[: -len(ending)]
            kept.append(stem)
            if stem[-2:] == stem[-1:] * 2:
                kept.append(stem[:-1])
    return kept


def _one_edit(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` differ by at most one letter added, dropped or changed."""
    if abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        return sum(x != y for x, y in zip(a, b, strict=True)) <= 1
    short, long = (a, b) if len(a) < len(b) else (b, a)
    return any(long[:at] + long[at + 1 :] == short for at in range(len(long)))
