"""A LangGraph item's value: the text it is searched by, and the filters it is matched against.

The text comes from the value's fields as LangGraph's index configuration names them (JSON
paths, ``"$"`` for the whole value), extracted by LangGraph's own path reader, so a path means
what it means to any LangGraph store. Several texts (several fields, or ``[*]`` over a list)
are joined into one, since an item carries one text and one vector; LangGraph's in-memory
store embeds each separately and ranks by the best.

A filter is matched the way LangGraph's in-memory store matches it: each top-level field of
the filter against the value's, a plain value by equality (a dict as a nested match, a list
element by element), an operator document by ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``,
``$lte``. Unlike that store, an ordered comparison with anything but a number matches nothing
(as in PostgreSQL's store) rather than raising, and an unknown operator is a
:class:`~agent_engine.errors.FilterError` before anything is read.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from langgraph.store.base import get_text_at_path, tokenize_path

from agent_engine import _validate
from agent_engine.errors import FilterError, ValidationError

__all__ = ["Fields", "check_filter", "fields", "json_text", "matches", "text_of"]

_ORDERED: Final[Mapping[str, Callable[[Any, Any], bool]]] = {
    "$gt": operator.gt,
    "$gte": operator.ge,
    "$lt": operator.lt,
    "$lte": operator.le,
}
_OPERATORS: Final = frozenset({"$eq", "$ne", *_ORDERED})

Fields = tuple[tuple[str, list[str] | str], ...]
"""Index paths, each with its tokens as LangGraph reads them (``"$"`` stands as itself)."""


def fields(paths: object, *, field: str = "fields") -> Fields:
    """``paths`` checked (a list of non-empty strings) and tokenized once."""
    listed = _validate.sequence(field, paths)
    if not listed:
        raise ValidationError(f"{field} names at least one path", field=field, value=paths)
    tokenized: list[tuple[str, list[str] | str]] = []
    for path in listed:
        if not isinstance(path, str) or not path.strip():
            raise ValidationError(
                f"{field} holds JSON paths (non-empty strings), got {path!r}",
                field=field,
                value=paths,
            )
        tokenized.append((path, path if path == "$" else tokenize_path(path)))
    return tuple(tokenized)


def json_text(value: Mapping[str, Any]) -> str:
    """The value as JSON text with sorted keys: what LangGraph embeds for the path ``"$"``."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def text_of(value: Mapping[str, Any], paths: Fields) -> str | None:
    """The text at ``paths`` in ``value``, joined by newlines; ``None`` where none is found."""
    found = [text for _, tokens in paths for text in get_text_at_path(value, tokens)]
    return "\n".join(found) if found else None


def check_filter(document: object) -> dict[str, Any] | None:
    """A search's filter checked: a mapping of field names to values or operator documents.

    Raises :class:`~agent_engine.errors.FilterError` naming what is wrong.
    """
    if document is None:
        return None
    if not isinstance(document, Mapping):
        raise FilterError(
            f"a filter is a mapping of value fields, got {type(document).__name__}",
            field="filter",
            value=document,
        )
    for name, condition in document.items():
        if not isinstance(name, str):
            raise FilterError(f"a filter's fields are strings, got {name!r}", field="filter")
        _check_condition(name, condition)
    return dict(document)


def _check_condition(name: str, condition: object) -> None:
    if isinstance(condition, Mapping):
        keys = list(condition)
        operators = [key for key in keys if isinstance(key, str) and key.startswith("$")]
        if not operators:
            for inner_name, inner in condition.items():
                _check_condition(f"{name}.{inner_name}", inner)
            return
        for key, operand in condition.items():
            if key not in _OPERATORS:
                known = ", ".join(sorted(_OPERATORS))
                raise FilterError(
                    f"filter on {name!r}: {key!r} is not an operator ({known}); an operator "
                    "document holds operators only",
                    field=name,
                    value=condition,
                )
            if key in _ORDERED and not _number(operand):
                raise FilterError(
                    f"filter on {name!r}: {key} compares with a number, got {operand!r}",
                    field=name,
                    value=condition,
                )
    elif isinstance(condition, Sequence) and not isinstance(condition, str):
        for index, inner in enumerate(condition):
            _check_condition(f"{name}[{index}]", inner)


def matches(value: Mapping[str, Any], document: Mapping[str, Any] | None) -> bool:
    """Whether ``value`` satisfies every field of the filter ``document`` (checked before)."""
    if not document:
        return True
    return all(_compare(value.get(name), condition) for name, condition in document.items())


def _compare(held: Any, condition: Any) -> bool:
    if isinstance(condition, Mapping):
        if any(isinstance(key, str) and key.startswith("$") for key in condition):
            return all(_apply(held, key, operand) for key, operand in condition.items())
        if not isinstance(held, Mapping):
            return False
        return all(_compare(held.get(key), inner) for key, inner in condition.items())
    if isinstance(condition, Sequence) and not isinstance(condition, str):
        return (
            isinstance(held, Sequence)
            and not isinstance(held, str)
            and len(held) == len(condition)
            and all(_compare(h, c) for h, c in zip(held, condition, strict=True))
        )
    return bool(held == condition)


def _apply(held: Any, key: str, operand: Any) -> bool:
    if key == "$eq":
        return bool(held == operand)
    if key == "$ne":
        return bool(held != operand)
    # int and float compare exactly as they are; float() would overflow on a huge int.
    return _number(held) and bool(_ORDERED[key](held, operand))


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
