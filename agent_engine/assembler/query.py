"""Query building: what a build ranks its candidates against, from the request and the history.

A step's request is often not enough to search with. "How much?" or "and the other one?"
mean something only after the turns before them; searched alone they find nothing (seed 004,
appendix C). A :class:`QueryBuilder` turns the request and the last items of the task's
timeline into the query a build ranks against; the assembler reads those items for it.

:class:`HistoryQuery`, the default builder, prepends the last turns to a *vague* request (one
that names next to nothing: "How much?", "Where did she go?") and leaves a self-contained
one as it is. Measured on LoCoMo, the last turn put before every question costs 10 to 16
points of recall: most questions say all they mean, and the last turn is about something
else; a vague follow-up finds next to nothing alone and, with the turn before it, as much as
the question it follows (``docs/benchmarks.md``, "Query building"). :class:`RewriteQuery` hands
the request and the turns to a callable of the user's (an LLM: a rewrite into a
self-contained question, or HyDE's hypothetical answer), and falls back to its base builder
when the callable fails or answers nothing usable.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import attrs

from agent_engine._log import get_logger
from agent_engine.errors import ValidationError
from agent_engine.models import ContextItem
from agent_engine.retrieval.text import STOPWORDS, words

__all__ = [
    "DEFAULT_QUERY_BUILDER",
    "HistoryQuery",
    "QueryBuilder",
    "RewriteQuery",
    "checked_query",
    "vague",
]

_POINTING = frozenset(
    {"much", "many", "one", "ones", "thing", "things", "else", "another", "other", "others"}
    | {"same", "kind", "sort", "more", "less", "again", "that", "this", "those", "these"}
)
"""Words that stand for something rather than name it."""
_BACK = frozenset({"it", "its", "that", "this", "those", "these", "they", "them", "there"})
_BACK |= frozenset({"she", "he", "her", "him", "his", "hers", "one", "ones", "then"})
"""Words that point back to something said before."""
_SHORTEST = 3
"""Words shorter than this name nothing on their own ("go", "do", "of")."""


@runtime_checkable
class QueryBuilder(Protocol):
    """**Protocol:** builds the query a build ranks against.

    ``history_turns(request)``: how many of the task timeline's last items it wants for this
    request (0: none is read, the usual case for a self-contained request). ``build_query``
    gets the request's query (or the task's description) and those items, oldest first, and
    returns the query.
    """

    def history_turns(self, request: str) -> int:
        """How many of the last timeline items to read for :meth:`build_query`."""
        ...

    def build_query(self, request: str, history: Sequence[ContextItem]) -> str:
        """The query to rank against."""
        ...


def _non_negative(_: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValidationError(
            f"{attribute.name} must be a whole number >= 0, got {value!r}",
            field=attribute.name,
            value=value,
        )


def vague(request: str) -> bool:
    """Whether ``request`` needs the turns before it to mean anything.

    It does when it names nothing of its own ("How much?", "Where did she go?"), or one thing
    beside a word that points back ("How much does it cost?", "What did he say about
    that?"). What it names: its words of three letters or more that are neither function
    words (:data:`~agent_engine.retrieval.text.STOPWORDS`) nor words that point elsewhere.
    "Who is Anthony?" names Anthony and is asked as it stands. An empty request is no
    question at all (a build without one ranks by recency and importance): not vague.
    """
    said = words(request)
    if not said:
        return False
    named = [
        word
        for word in said
        if len(word) >= _SHORTEST and word not in STOPWORDS and word not in _POINTING
    ]
    return not named or (len(named) == 1 and any(word in _BACK for word in said))


@attrs.frozen
class HistoryQuery:
    """The request, with the last ``turns`` timeline items before it when it is vague.

    One turn by default: a follow-up points at what was said just before it. Measured on
    LoCoMo's tuning conversations ("What about that?" after each question), the last turn
    finds 98% of what the question itself finds; three turns, 70%.

    Vague: see :func:`vague` (``always``: every request gets the turns; measured, that costs
    10 to 16 points of LoCoMo's recall). Each item's text is cut to its first ``max_words``
    words, so one long tool output does not drown the request. The request comes last,
    nearest to what the embedder's pooling and the lexical ranking weigh as the question.
    """

    turns: int = attrs.field(default=1, validator=_non_negative)
    always: bool = False
    max_words: int = attrs.field(default=40, validator=_non_negative)

    def history_turns(self, request: str) -> int:
        """``turns`` for a vague request (any, with ``always``); none for the rest."""
        return self.turns if self.always or vague(request) else 0

    def build_query(self, request: str, history: Sequence[ContextItem]) -> str:
        """``request`` alone, or after the history when it is vague."""
        if not history or not (self.always or vague(request)):
            return request
        recent = history[-self.turns :] if self.turns else []
        parts = [" ".join(item.body.split()[: self.max_words]) for item in recent]
        return " ".join([*(part for part in parts if part), request]).strip()


@attrs.frozen
class RewriteQuery:
    """A query the user's callable writes: a rewrite, or HyDE's hypothetical answer.

    ``rewrite(request, history)`` returns the text to search with: a self-contained
    question ("How much?" -> "What is the budget for the Hawaii trip?"), or with
    ``keep_request`` a hypothetical answer searched together with the request (HyDE: a
    statement embeds like the statements stored). It sees the last ``turns`` timeline items.
    When it raises or returns something other than non-blank text, ``base`` builds the query
    instead and the failure is logged: a build never fails for its query.
    """

    rewrite: Callable[[str, Sequence[ContextItem]], str]
    keep_request: bool = False
    base: QueryBuilder = attrs.field(factory=HistoryQuery)
    turns: int = attrs.field(default=6, validator=_non_negative)

    def history_turns(self, request: str) -> int:
        """What the callable and the fallback see."""
        return max(self.turns, self.base.history_turns(request))

    def build_query(self, request: str, history: Sequence[ContextItem]) -> str:
        """The callable's query, or ``base``'s when it fails."""
        try:
            written = self.rewrite(request, _last(history, self.turns))
        except Exception as error:  # noqa: BLE001 - the user's callable; contained
            return self._fallback(request, history, f"{type(error).__name__}: {error}")
        if not isinstance(written, str) or not written.strip():
            return self._fallback(request, history, f"returned {written!r}")
        written = " ".join(written.split())
        return f"{request} {written}" if self.keep_request else written

    def _fallback(self, request: str, history: Sequence[ContextItem], why: str) -> str:
        get_logger(component="query").warning("query_rewrite_failed", error=why)
        try:
            return self.base.build_query(request, _last(history, self.base.history_turns(request)))
        except Exception as error:  # noqa: BLE001 - a base of the user's; contained too
            get_logger(component="query").warning("query_base_failed", error=str(error))
            return request


def _last(history: Sequence[ContextItem], count: int) -> list[ContextItem]:
    """The last ``count`` items (none for 0, where ``history[-0:]`` would be all)."""
    return list(history[-count:]) if count else []


def checked_query(
    builder: QueryBuilder, request: str, history: Callable[[int], Sequence[ContextItem]]
) -> str:
    """``builder``'s query for ``request``, the history it wants read through ``history``.

    Raises :class:`~agent_engine.errors.ValidationError` when the builder answers nonsense
    (a count that is not one, a query that is not text); the assembler then ranks against
    the request as given.
    """
    wanted = builder.history_turns(request)
    if isinstance(wanted, bool) or not isinstance(wanted, int) or wanted < 0:
        raise ValidationError(f"history_turns gave {wanted!r}, not a count", field="history_turns")
    query = builder.build_query(request, history(wanted) if wanted else [])
    if not isinstance(query, str):
        raise ValidationError(f"build_query gave {query!r:.200}, not text", field="build_query")
    return query


DEFAULT_QUERY_BUILDER = HistoryQuery()
"""The query builder an assembler uses unless given another."""
