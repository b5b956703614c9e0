"""Compile parsed filters (:class:`~agent_engine.filters.Filter`) and orders to SQL.

The semantics are the in-memory backend's (``Filter.matches`` is the reference): ``$ne`` and
``$nin`` match nulls, comparisons never do, ``$eq: None`` is a null test, nulls sort last in
both directions and ties break by id.

No filter may cost the database more to plan as its lists grow (``docs/filters.md`` bounds
their length; this module keeps their cost flat):

* a list of values is one parameter on PostgreSQL (``= ANY(:array)``) and one ``IN`` list on
  SQLite, never a condition per value;
* tag tests read ``ae_item_tags``. The tags a filter requires (``$eq``, ``$all``) are pooled,
  and so are the tags it forbids (``$ne``, ``$nin``). A short list (:data:`SHORT_TAG_LIST`)
  is probed per item through the primary key ``(item_id, tag)``, the cheapest plan when other
  conditions narrow the rows (a namespace). A longer one is a single set read through the tag
  index: ``id IN (SELECT item_id ... GROUP BY item_id HAVING count(*) = n)`` for all-of, and
  ``id IN (SELECT item_id ...)`` for any-of. A chain of ``EXISTS`` per tag instead costs
  PostgreSQL's planner time that grows faster than the cube of its length (minutes at a few
  hundred tags) and exceeds SQLite's expression depth at a thousand.
* a long none-of list is ``NOT IN`` that set on SQLite, which reads it once; PostgreSQL keeps
  ``NOT EXISTS`` (an anti-join), because its ``NOT IN`` falls back to rescanning the set for
  every row once the set outgrows ``work_mem``.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterator
from datetime import datetime
from enum import Enum
from typing import Any, Final, cast

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from agent_engine import _validate
from agent_engine.filters import FIELDS, Condition, FieldKind, Filter, Op, Order
from agent_engine.memory.sql._rows import encode_time
from agent_engine.memory.sql._schema import item_tags, items

__all__ = [
    "ID_CHUNK",
    "SHORT_TAG_LIST",
    "chunks",
    "count_items",
    "items_by_id",
    "order_clauses",
    "select_items",
    "where_clause",
]

ID_CHUNK: Final = 5000
"""Ids per ``IN (...)`` list: far below SQLite's and PostgreSQL's parameter limits."""

SHORT_TAG_LIST: Final = 4
"""Tag lists up to this long are probed per item; longer ones are read as one set.

At five tags PostgreSQL already plans the probes for 5 ms, at six for 60 ms."""

_COMPARISONS = {Op.GT: operator.gt, Op.GTE: operator.ge, Op.LT: operator.lt, Op.LTE: operator.le}
_NULLABLE_ORDER = frozenset(name for name, spec in FIELDS.items() if spec.nullable)
_ARRAY_TYPES: Final[dict[FieldKind, sa.types.TypeEngine[Any]]] = {
    FieldKind.STRING: postgresql.ARRAY(sa.Text()),
    FieldKind.ENUM: postgresql.ARRAY(sa.Text()),
    FieldKind.DATETIME: postgresql.ARRAY(sa.BigInteger()),
    FieldKind.TAGS: postgresql.ARRAY(sa.Text()),
}


def where_clause(where: Filter, dialect: str) -> sa.ColumnElement[bool]:
    """The SQL condition equivalent to ``where`` on ``dialect`` (``TRUE`` for the empty filter).

    ``dialect`` is the SQLAlchemy dialect name (``"sqlite"``, ``"postgresql"``).
    """
    if not where.conditions:
        return sa.true()
    clauses = [
        _condition(condition, dialect)
        for condition in where.conditions
        if condition.spec.kind is not FieldKind.TAGS
    ]
    clauses.extend(_tags([c for c in where.conditions if c.spec.kind is FieldKind.TAGS], dialect))
    return sa.and_(sa.true(), *clauses)  # an empty $all leaves no clause at all


def select_items(where: Filter, order: Order, limit: int | None, dialect: str) -> sa.Select[Any]:
    """``SELECT`` of whole item rows: matching, ordered, limited.

    Tiers and the assembler repeat the same few filters on every step, and building the
    statement costs about as much as SQLite takes to run it, so built statements are kept
    (SQLAlchemy statements are immutable and safe to share between threads).
    """
    try:
        hash(where)
    except TypeError:  # a value that cannot be a cache key: build it afresh
        return _select_items(where, order, limit, dialect)
    return _select_items_cached(where, order, limit, dialect)


def count_items(where: Filter, dialect: str) -> sa.Select[Any]:
    """``SELECT count(*)`` of the items ``where`` matches."""
    return sa.select(sa.func.count()).select_from(items).where(where_clause(where, dialect))


def items_by_id(item_ids: list[str]) -> sa.Select[Any]:
    """``SELECT`` of the whole rows of ``item_ids`` (at most :data:`ID_CHUNK` of them)."""
    return sa.select(items).where(items.c.id.in_(item_ids))


def chunks(values: list[str]) -> Iterator[list[str]]:
    """``values`` in lists short enough for one ``IN (...)``."""
    for start in range(0, len(values), ID_CHUNK):
        yield values[start : start + ID_CHUNK]


def _select_items(where: Filter, order: Order, limit: int | None, dialect: str) -> sa.Select[Any]:
    query = sa.select(items).where(where_clause(where, dialect)).order_by(*order_clauses(order))
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


def _condition(condition: Condition, dialect: str) -> sa.ColumnElement[bool]:
    column = items.c[condition.field]
    op, raw = condition.op, condition.value
    if op is Op.EXISTS:
        return column.is_not(None) if raw else column.is_(None)
    if op in {Op.IN, Op.NIN}:
        return _membership(condition, dialect)
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


def _membership(condition: Condition, dialect: str) -> sa.ColumnElement[bool]:
    """``$in``/``$nin`` with Python's ``in``: a null matches only a listed ``None``."""
    column = items.c[condition.field]
    raw: tuple[Any, ...] = condition.value
    # No column holds an integer past 64 bits, so such a value equals nothing (and neither
    # driver would send it).
    values = [_value(v) for v in raw if v is not None and not _beyond_64_bits(v)]
    has_null = any(v is None for v in raw)
    if condition.op is Op.IN:
        inside = _one_of(column, values, condition.spec.kind, dialect)
        return sa.or_(inside, column.is_(None)) if has_null else inside
    outside = ~_one_of(column, values, condition.spec.kind, dialect)
    if has_null:
        return sa.and_(outside, column.is_not(None))
    return sa.or_(outside, column.is_(None)) if condition.spec.nullable else outside


def _one_of(
    column: sa.ColumnElement[Any], values: list[Any], kind: FieldKind, dialect: str
) -> sa.ColumnElement[bool]:
    """``column`` equals one of ``values``.

    ``= ANY(:array)`` on PostgreSQL (one parameter and one statement text whatever the list's
    length, so prepared plans are shared), an ``IN`` list elsewhere.
    """
    if not values:
        return sa.false()
    if dialect != "postgresql":
        return column.in_(values)
    array_type = _ARRAY_TYPES.get(kind)
    if array_type is None:  # numbers: one array holds one type
        if all(isinstance(v, int) for v in values):
            array_type = postgresql.ARRAY(sa.BigInteger())
        else:  # exact for every stored number: 32-bit integers and importance in [0, 1]
            array_type = postgresql.ARRAY(sa.Float())
            values = [float(v) for v in values]
    listed = sa.bindparam(None, values, type_=array_type)
    return column == sa.any_(listed)


def _beyond_64_bits(value: Any) -> bool:
    return isinstance(value, int) and not _validate.MIN_INT <= value <= _validate.MAX_INT


# ----------------------------------------------------------------------------- tags


def _tags(conditions: list[Condition], dialect: str) -> list[sa.ColumnElement[bool]]:
    """Tag tests: ``$eq`` contains, ``$in`` any-of, ``$nin`` none-of, ``$all`` all-of.

    Required tags (``$eq``, ``$all``) and forbidden ones (``$ne``, ``$nin``) are pooled across
    the conditions, so filters joined with ``Filter.and_`` cost no more than one document.
    """
    clauses: list[sa.ColumnElement[bool]] = []
    required: dict[str, None] = {}
    forbidden: dict[str, None] = {}
    for condition in conditions:
        op, value = condition.op, condition.value
        if op is Op.EXISTS:
            clauses.append(_tagged_probe(None, dialect) if value else ~_tagged_probe(None, dialect))
        elif op is Op.IN:
            clauses.append(_any_of(list(value), dialect))
        else:
            pool = required if op in {Op.EQ, Op.ALL} else forbidden
            pool.update(dict.fromkeys((value,) if op in {Op.EQ, Op.NE} else value))
    if required:
        clauses.append(_all_of(list(required), dialect))
    if forbidden:
        clauses.append(_none_of(list(forbidden), dialect))
    return clauses


def _tagged_probe(tags: list[str] | None, dialect: str) -> sa.ColumnElement[bool]:
    """``EXISTS`` a tag row of the item (among ``tags`` when given): a primary-key probe."""
    query = sa.select(sa.literal(1)).where(item_tags.c.item_id == items.c.id)
    if tags is not None:
        query = query.where(_one_of(item_tags.c.tag, tags, FieldKind.TAGS, dialect))
    return query.exists()


def _tagged_ids(tags: list[str], dialect: str) -> sa.Select[Any]:
    """The ids of items with any of ``tags``: one read of the tag index, not per item."""
    return sa.select(item_tags.c.item_id).where(
        _one_of(item_tags.c.tag, tags, FieldKind.TAGS, dialect)
    )


def _all_of(tags: list[str], dialect: str) -> sa.ColumnElement[bool]:
    if len(tags) <= SHORT_TAG_LIST:
        return sa.and_(*(_tagged_probe([tag], dialect) for tag in tags))
    # (item_id, tag) is the primary key, so count(*) counts distinct listed tags.
    having_all = (
        _tagged_ids(tags, dialect)
        .group_by(item_tags.c.item_id)
        .having(sa.func.count() == len(tags))
    )
    return items.c.id.in_(having_all)


def _any_of(tags: list[str], dialect: str) -> sa.ColumnElement[bool]:
    if not tags:
        return sa.false()
    if len(tags) <= SHORT_TAG_LIST:
        return _tagged_probe(tags, dialect)
    return items.c.id.in_(_tagged_ids(tags, dialect))


def _none_of(tags: list[str], dialect: str) -> sa.ColumnElement[bool]:
    if len(tags) <= SHORT_TAG_LIST or dialect != "sqlite":
        return ~_tagged_probe(tags, dialect)
    # item_id is never null, so NOT IN has no null trap.
    return items.c.id.not_in(_tagged_ids(tags, dialect))
