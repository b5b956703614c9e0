"""Where a project's aliases are kept: beside its memory, in the same backend.

Aliases are the words a project's people use for what its memory names (seed 001 section 6;
what they do in a build is :mod:`agent_engine.retrieval.aliases`). A user edits them (``agent-engine
memory alias add/list/remove``), so they persist with the memory and every process sharing it
sees them: every backend exposes an ``aliases`` store the way it exposes its ``conflicts``
(a table for SQL, ``ae_aliases``; a hash per namespace for Redis).

Aliases are kept per namespace, so a project's never reach another project. They describe
how people talk, not what happened, so they are not memory items: clearing a project's items
leaves them, and only removing them forgets them. A namespace holds at most
:data:`MAX_TERMS` terms of at most :data:`MAX_EXPANSIONS` expansions each: a build reads
them all.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import Final, Protocol, runtime_checkable

from agent_engine import _validate
from agent_engine.errors import BackendError, ValidationError
from agent_engine.retrieval.aliases import term_key, term_words

__all__ = [
    "MAX_ALIAS_LENGTH",
    "MAX_EXPANSIONS",
    "MAX_TERMS",
    "AliasStore",
    "NO_ALIAS_STORE",
    "InMemoryAliasStore",
    "check_add",
    "check_namespace",
    "check_remove",
    "merged",
    "ordered",
]

MAX_ALIAS_LENGTH: Final = 200
"""The longest term or expansion, in characters."""
MAX_EXPANSIONS: Final = 16
"""The most expansions one term may have."""
MAX_TERMS: Final = 500
"""The most terms one namespace may hold."""


@runtime_checkable
class AliasStore(Protocol):
    """**Protocol:** each namespace's aliases, a term to its expansions.

    ``add`` gives ``term`` the ``expansions`` it lacks (an expansion it has already is no
    change), atomically, and returns all of the term's expansions as stored; past
    :data:`MAX_TERMS` terms or :data:`MAX_EXPANSIONS` expansions it raises
    :class:`~agent_engine.errors.ValidationError` and changes nothing. ``remove`` takes the
    given ``expansions`` from ``term`` (all of them and the term when ``None``) and returns
    how many it removed (0: nothing was there). ``of_namespace`` returns a namespace's
    terms, sorted, each with its expansions in :func:`ordered` order; ``namespaces`` the
    namespaces that hold any, sorted.

    Terms are stored as :func:`~agent_engine.retrieval.aliases.term_key` gives them, so
    "Mel" and "MEL" are one term; expansions as written, their spaces collapsed. Arguments
    are checked by :func:`check_add`, :func:`check_remove` and :func:`check_namespace`.
    """

    def add(self, namespace: str, term: str, expansions: Sequence[str]) -> tuple[str, ...]:
        """Give ``term`` these expansions too; return all of its expansions."""
        ...

    def remove(self, namespace: str, term: str, expansions: Sequence[str] | None = None) -> int:
        """Take expansions (``None``: all) from ``term``; return how many were removed."""
        ...

    def of_namespace(self, namespace: str) -> dict[str, tuple[str, ...]]:
        """A namespace's terms and their expansions."""
        ...

    def namespaces(self) -> list[str]:
        """The namespaces that hold aliases."""
        ...


def check_namespace(namespace: object) -> str:
    """A namespace to read or write aliases of (an identifier)."""
    return _validate.identifier("namespace", namespace)


def _term(term: object) -> str:
    text = _validate.text("term", term, max_length=MAX_ALIAS_LENGTH)
    key = term_key(text)
    if not key:
        raise ValidationError("term must hold a word", field="term", value=term)
    return key


def _expansions(key: str, expansions: object) -> tuple[str, ...]:
    if isinstance(expansions, str):
        raise ValidationError(
            "expansions must be a list of strings, not one string",
            field="expansions",
            value=expansions,
        )
    values = _validate.sequence("expansions", expansions)
    checked: dict[str, None] = {}
    for value in values:
        text = " ".join(_validate.text("expansions", value, max_length=MAX_ALIAS_LENGTH).split())
        if not term_words(text):
            raise ValidationError("an expansion must hold a word", field="expansions", value=value)
        if term_key(text) == key:
            raise ValidationError(
                f"{text!r} is the term itself, not an expansion of it",
                field="expansions",
                value=value,
            )
        checked[text] = None
    return tuple(checked)


def check_add(
    namespace: object, term: object, expansions: object
) -> tuple[str, str, tuple[str, ...]]:
    """``add``'s arguments as stored: the namespace, the term's key, its new expansions."""
    key = _term(term)
    added = _expansions(key, expansions)
    if not added:
        raise ValidationError("give at least one expansion", field="expansions", value=expansions)
    return check_namespace(namespace), key, added


def check_remove(
    namespace: object, term: object, expansions: object
) -> tuple[str, str, tuple[str, ...] | None]:
    """``remove``'s arguments as stored (``None`` expansions: all of the term's)."""
    key = _term(term)
    taken = None if expansions is None else _expansions(key, expansions)
    return check_namespace(namespace), key, taken


def ordered(expansions: Iterable[str]) -> tuple[str, ...]:
    """Expansions in the order every store lists them: folded, then as written."""
    return tuple(sorted(set(expansions), key=lambda text: (term_key(text), text)))


def merged(key: str, held: Sequence[str], added: Sequence[str], *, terms: int) -> tuple[str, ...]:
    """A term's expansions once ``added`` join the ``held`` ones, within the limits.

    ``terms``: how many terms the namespace holds now. Raises
    :class:`~agent_engine.errors.ValidationError` when the add would pass a limit.
    """
    if not held and terms >= MAX_TERMS:
        raise ValidationError(
            f"a namespace holds at most {MAX_TERMS} alias terms", field="term", value=key
        )
    result = ordered([*held, *added])
    if len(result) > MAX_EXPANSIONS:
        raise ValidationError(
            f"a term has at most {MAX_EXPANSIONS} expansions, {key!r} would have {len(result)}",
            field="expansions",
            value=list(added),
        )
    return result


class InMemoryAliasStore:
    """Implements :class:`AliasStore` in the process, for backends whose items live there too."""

    def __init__(self, lock: threading.RLock | None = None) -> None:
        self._lock = lock if lock is not None else threading.RLock()
        self._terms: dict[str, dict[str, tuple[str, ...]]] = {}

    def add(self, namespace: str, term: str, expansions: Sequence[str]) -> tuple[str, ...]:
        """Give ``term`` these expansions too; return all of its expansions."""
        namespace, key, added = check_add(namespace, term, expansions)
        with self._lock:
            terms = self._terms.get(namespace, {})
            result = merged(key, terms.get(key, ()), added, terms=len(terms))
            self._terms.setdefault(namespace, {})[key] = result
            return result

    def remove(self, namespace: str, term: str, expansions: Sequence[str] | None = None) -> int:
        """Take expansions (``None``: all) from ``term``; return how many were removed."""
        namespace, key, taken = check_remove(namespace, term, expansions)
        with self._lock:
            terms = self._terms.get(namespace, {})
            held = terms.get(key, ())
            kept = () if taken is None else tuple(e for e in held if e not in taken)
            if kept:
                terms[key] = kept
            else:
                terms.pop(key, None)
            if not terms:
                self._terms.pop(namespace, None)
            return len(held) - len(kept)

    def of_namespace(self, namespace: str) -> dict[str, tuple[str, ...]]:
        """A namespace's terms and their expansions."""
        namespace = check_namespace(namespace)
        with self._lock:
            return dict(sorted(self._terms.get(namespace, {}).items()))

    def namespaces(self) -> list[str]:
        """The namespaces that hold aliases."""
        with self._lock:
            return sorted(self._terms)


class _NoAliasStore:
    """The aliases of a backend that keeps none: it reads as empty and refuses to keep any."""

    def add(self, namespace: str, term: str, expansions: Sequence[str]) -> tuple[str, ...]:
        """Refused: nothing would keep them."""
        check_add(namespace, term, expansions)
        raise BackendError("this backend keeps no aliases", backend="aliases")

    def remove(self, namespace: str, term: str, expansions: Sequence[str] | None = None) -> int:
        """Nothing to remove."""
        check_remove(namespace, term, expansions)
        return 0

    def of_namespace(self, namespace: str) -> dict[str, tuple[str, ...]]:
        """None."""
        check_namespace(namespace)
        return {}

    def namespaces(self) -> list[str]:
        """None."""
        return []


NO_ALIAS_STORE: AliasStore = _NoAliasStore()
"""What ``BaseBackend.aliases`` gives when a backend set no alias store: builds read no
aliases from it, and adding one raises :class:`~agent_engine.errors.BackendError`."""
