"""Compile parsed filters (:class:`~agent_engine.filters.Filter`) and orders to SQL.

The semantics are the in-memory backend's (``Filter.matches`` is the reference): ``$ne`` and
``$nin`` match nulls, comparisons never do, ``$eq: None`` is a null test, nulls sort last in
both directions and ties break by id. Tag tests are ``EXISTS`` subqueries on ``ae_item_tags``
(its primary key and its tag index serve them on both dialects).
"""

from __future__ import annotations

import functools
import operator
from datetime import datetime
from enum import Enum
from typing import Any, cast

import sqlalchemy as sa

from agent_engine.filters import Condition, FieldKind, Filter, Op, Order
from agent_engine.memory.sql._rows import encode_time
from agent_engine.memory.sql._schema import item_tags, items

__all__ = ["order_clauses", "select_items", "where_clause"]

_COMPARISONS = {Op.GT: operator.gt, Op.GTE: operator.ge, Op.LT: operator.lt, Op.LTE: operator.le}
_NULLABLE_ORDER = frozenset({"token_cost", "last_accessed_at", "expires_at"})


def where_clause(where: Filter) -> sa.ColumnElement[bool]:
    """The SQL condition equivalent to ``where`` (``TRUE`` for the empty filter)."""
    if not where.conditions:
        return sa.true()
    return sa.and_(*(_condition(condition) for condition in where.conditions))


def select_items(where: Filter, order: Order, limit: int | None) -> sa.Select[Any]:
    """``SELECT`` of whole item rows: matching, ordered, limited.

    Tiers and the assembler repeat the same few filters on every step, and building the
    statement costs about as much as SQLite takes to run it, so built statements are kept
    (SQLAlchemy statements are immutable and safe to share between threads).
    """
    try:
        hash(where)
    except TypeError:  # a value that cannot be a cache key: build it afresh
        return _select_items(where, order, limit)
    return _select_items_cached(where, order, limit)


def _select_items(where: Filter, order: Order, limit: int | None) -> sa.Select[Any]:
    query = sa.select(items).where(where_clause(where)).order_by(*order_clauses(order))
    return query if limit is None else query.limit(limit)


_select_items_cached = functools.lru_cache(maxsize=512)(_select_items)


def order_clauses(order: Order) -> list[sa.ColumnElement[Any]]:
    """``ORDER BY`` terms: the field (nulls last) then id ascending."""
    column = items.c[order.field]
    term = column.desc() if order.descending else column.asc()
    if order.field in _NULLABLE_ORDER:
        term = sa.nulls_last(term)
    return [term, items.c.id.asc()]


def _value(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, datetime):
        return encode_time(value)
    return value


def _condition(condition: Condition) -> sa.ColumnElement[bool]:
    if condition.spec.kind is FieldKind.TAGS:
        return _tags(condition.op, condition.value)
    column = items.c[condition.field]
    op, raw = condition.op, condition.value
    if op is Op.EXISTS:
        return column.is_not(None) if raw else column.is_(None)
    if op in {Op.IN, Op.NIN}:
        return _membership(column, op, raw, nullable=condition.spec.nullable)
    value = _value(raw)
    if op in {Op.EQ, Op.NE}:
        return _equality(column, op, value, nullable=condition.spec.nullable)
    # Comparisons never match a null, in SQL as in the reference.
    compared: sa.ColumnElement[bool] = _COMPARISONS[op](column, value)
    return compared


def _equality(
    column: sa.Column[Any], op: Op, value: Any, *, nullable: bool
) -> sa.ColumnElement[bool]:
    """``$eq``/``$ne``: ``None`` is a null test, and ``$ne`` matches nulls (Python's ``!=``)."""
    if value is None:
        return column.is_(None) if op is Op.EQ else column.is_not(None)
    if op is Op.EQ:
        return cast("sa.ColumnElement[bool]", column == value)
    differs = cast("sa.ColumnElement[bool]", column != value)
    return sa.or_(differs, column.is_(None)) if nullable else differs


def _membership(
    column: sa.Column[Any], op: Op, raw: tuple[Any, ...], *, nullable: bool
) -> sa.ColumnElement[bool]:
    """``$in``/``$nin`` with Python's ``in``: a null matches only a listed ``None``."""
    values = [_value(v) for v in raw if v is not None]
    has_null = any(v is None for v in raw)
    if op is Op.IN:
        inside: sa.ColumnElement[bool] = column.in_(values) if values else sa.false()
        return sa.or_(inside, column.is_(None)) if has_null else inside
    outside: sa.ColumnElement[bool] = column.not_in(values) if values else sa.true()
    if has_null:
        return sa.and_(outside, column.is_not(None))
    return sa.or_(outside, column.is_(None)) if nullable else outside


def _has_tags(tags: list[str] | None) -> sa.ColumnElement[bool]:
    """``EXISTS`` a tag row of the item (among ``tags`` when given)."""
    query = sa.select(sa.literal(1)).where(item_tags.c.item_id == items.c.id)
    if tags is not None:
        query = query.where(item_tags.c.tag.in_(tags))
    return query.exists()


def _tags(op: Op, value: Any) -> sa.ColumnElement[bool]:
    """Tag tests: ``$eq`` contains, ``$in`` any-of, ``$nin`` none-of, ``$all`` all-of."""
    if op is Op.EXISTS:
        return _has_tags(None) if value else ~_has_tags(None)
    wanted = [value] if op in {Op.EQ, Op.NE} else list(value)
    if op is Op.ALL:
        return sa.and_(sa.true(), *(_has_tags([tag]) for tag in wanted))
    some = _has_tags(wanted) if wanted else sa.false()
    return some if op in {Op.EQ, Op.IN} else ~some
