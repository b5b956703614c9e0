"""A project's aliases: the words its people use for the names and terms its memory holds.

Seed 001's alias and synonym expansion: a user maps a *term* to one or more *expansions*
("Mel" to "Melanie Smith", "k8s" to "kubernetes", "auth" to "authentication login"). An
alias reads one way, as the seed's map does: a query that writes the term also means its
expansions. Write the reverse alias too when memory uses the short form and questions the
long one.

A term is found in a query as whole words, case and diacritics aside, a possessive ``'s``
allowed ("Mel's"). What a found term does in a build:

* **names**: an expansion that names a known source (by the rules of
  :mod:`agent_engine.retrieval.names`) makes the query name it, through the term's words;
* **BM25**: the expansions join the lexical query, so "auth" matches a memory that only
  says "authentication".

The dense query is left as written: an embedder already places paraphrases near each other,
and appended words would pull the query's vector off what was asked.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

import attrs

from agent_engine.retrieval.names import WORD, folded_words, name_words

__all__ = ["NO_ALIASES", "Aliases", "term_key", "term_words"]


def term_words(text: str) -> tuple[str, ...]:
    """``text``'s words as an alias term matches them: folded, a possessive 's dropped."""
    return folded_words(text)


def term_key(term: str) -> str:
    """The form a term is stored and compared in: its folded words, space-separated.

    "Mel", "MEL" and "mél" are one term; an empty key means ``term`` holds no word.
    """
    return " ".join(term_words(term))


@attrs.frozen
class Aliases:
    """An alias map, read once for a build: each term's key (:func:`term_key`) to expansions."""

    terms: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)
    _order: tuple[tuple[str, tuple[str, ...]], ...] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        # Longer terms first, read once: every gather of a build asks with the same map.
        order = sorted(self.terms, key=lambda key: (-key.count(" "), key))
        object.__setattr__(self, "_order", tuple((key, tuple(key.split(" "))) for key in order))

    def __bool__(self) -> bool:
        return bool(self.terms)

    def found(self, query: str) -> Iterator[tuple[tuple[str, ...], tuple[str, ...]]]:
        """Each term ``query`` writes, with the query's words that write it and its expansions.

        The words are as written; a longer term goes first where two overlap ("New York"
        before "York"), and a word counts for one term only.
        """
        if not self.terms:
            return
        written = WORD.findall(query)
        folded = [folded_words(word)[0] for word in written]
        present = set(folded)
        taken = [False] * len(written)
        for key, parts in self._order:
            if parts[0] not in present:
                continue
            size = len(parts)
            for at in range(len(folded) - size + 1):
                if tuple(folded[at : at + size]) == parts and not any(taken[at : at + size]):
                    taken[at : at + size] = [True] * size
                    yield tuple(written[at : at + size]), self.terms[key]

    def naming(self, query: str, sources: Iterable[str]) -> dict[str, tuple[str, ...]]:
        """The ``sources`` the query names through a term, with the term's words as written.

        An expansion names a source by :func:`~agent_engine.retrieval.names.name_words`'s
        rules, as if it were the query: write it as the name is written ("Melanie", not
        "melanie", to name "Melanie Smith" by its first name).
        """
        found: dict[str, tuple[str, ...]] = {}
        known = list(sources)
        for words, expansions in self.found(query):
            for expansion in expansions:
                for source in name_words(expansion, known):
                    found[source] = tuple(dict.fromkeys(found.get(source, ()) + words))
        return found

    def expand(self, query: str) -> str:
        """``query`` with the expansions of the terms it writes appended (for BM25)."""
        extra = [expansion for _, expansions in self.found(query) for expansion in expansions]
        return " ".join([query, *dict.fromkeys(extra)]) if extra else query


NO_ALIASES = Aliases()
"""No aliases: what a build uses when its project has none."""
