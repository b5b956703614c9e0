"""The filter language every backend speaks (specified in ``docs/filters.md``).

A filter document (a dict such as ``{"kind": "decision", "importance": {"$gte": 0.7}}``) is
parsed and validated once into a :class:`Filter`: a conjunction of typed
:class:`Condition` values. The in-memory backend evaluates that tree in Python and the SQL
backend compiles the same tree to SQL, so there is one grammar and one set of errors for
every backend. Anything outside the grammar (an unknown field or operator, a value of the
wrong type) raises :class:`~agent_engine.errors.FilterError`; it never quietly matches
nothing.

A filter's size is bounded (:data:`MAX_LIST_VALUES`, :data:`MAX_VALUES`,
:data:`MAX_CONDITIONS`) and checked whenever a :class:`Filter` is built, however it is built,
so a filter past a limit raises :class:`~agent_engine.errors.FilterTooLargeError` before any
backend sees it: no request can make a database plan or scan for minutes.
"""

from __future__ import annotations

import enum
import math
import operator
import os
import sys
import warnings
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Any, Final, cast

import attrs

from agent_engine import _validate
from agent_engine.errors import FilterError, FilterTooLargeError
from agent_engine.models import ArchiveReason, ContextItem, Status, Tier

__all__ = [
    "FIELDS",
    "MAX_CONDITIONS",
    "MAX_LIST_VALUES",
    "MAX_VALUES",
    "ORDER_FLIP_RELEASE",
    "Condition",
    "FieldKind",
    "FieldSpec",
    "Filter",
    "FilterInput",
    "Op",
    "Order",
    "OrderInput",
    "parse_filter",
    "parse_order",
]


class FieldKind(enum.Enum):
    """The value type of a filterable field, which decides its operators."""

    STRING = "string"
    ENUM = "enum"
    NUMBER = "number"
    DATETIME = "datetime"
    TAGS = "tags"


@attrs.frozen
class FieldSpec:
    """What the language knows about one field of :class:`~agent_engine.models.ContextItem`."""

    name: str
    kind: FieldKind
    nullable: bool = False
    enum_type: type[enum.StrEnum] | None = None
    max_int: int = _validate.MAX_INT
    """Integers compared with the field (not listed) lie in ``[-max_int - 1, max_int]``: what
    its SQL column binds."""

    @property
    def orderable(self) -> bool:
        """Whether ``order_by`` accepts the field (tags are a set and have no order)."""
        return self.kind is not FieldKind.TAGS


FIELDS: Final[Mapping[str, FieldSpec]] = {
    spec.name: spec
    for spec in (
        FieldSpec("id", FieldKind.STRING),
        FieldSpec("kind", FieldKind.STRING),
        FieldSpec("source", FieldKind.STRING),
        FieldSpec("session", FieldKind.STRING),
        FieldSpec("agent", FieldKind.STRING),
        FieldSpec("namespace", FieldKind.STRING),
        FieldSpec("fingerprint", FieldKind.STRING),
        FieldSpec("tier", FieldKind.ENUM, enum_type=Tier),
        FieldSpec("status", FieldKind.ENUM, enum_type=Status),
        FieldSpec("importance", FieldKind.NUMBER),
        FieldSpec("token_cost", FieldKind.NUMBER, nullable=True, max_int=_validate.MAX_COUNT),
        FieldSpec("access_count", FieldKind.NUMBER, max_int=_validate.MAX_COUNT),
        FieldSpec("timestamp", FieldKind.DATETIME),
        FieldSpec("last_accessed_at", FieldKind.DATETIME, nullable=True),
        FieldSpec("expires_at", FieldKind.DATETIME, nullable=True),
        FieldSpec("tags", FieldKind.TAGS),
        FieldSpec("key", FieldKind.STRING, nullable=True),
        FieldSpec("version", FieldKind.NUMBER, max_int=_validate.MAX_COUNT),
        FieldSpec("valid_from", FieldKind.DATETIME, nullable=True),
        FieldSpec("valid_to", FieldKind.DATETIME, nullable=True),
        FieldSpec("superseded_by", FieldKind.STRING, nullable=True),
        FieldSpec("archived_at", FieldKind.DATETIME, nullable=True),
        FieldSpec("archived_reason", FieldKind.ENUM, nullable=True, enum_type=ArchiveReason),
    )
}
"""Every field a filter or ``order_by`` may name."""


class Op(enum.StrEnum):
    """Operators of the language; the value is how a filter document spells them."""

    EQ = "$eq"
    NE = "$ne"
    GT = "$gt"
    GTE = "$gte"
    LT = "$lt"
    LTE = "$lte"
    IN = "$in"
    NIN = "$nin"
    EXISTS = "$exists"
    ALL = "$all"


_COMPARISONS: Final = frozenset({Op.GT, Op.GTE, Op.LT, Op.LTE})
_MEMBERSHIP: Final = frozenset({Op.IN, Op.NIN, Op.ALL})

MAX_LIST_VALUES: Final = 1_000
"""The most values one ``$in``, ``$nin`` or ``$all`` list may hold (before duplicates drop)."""
MAX_VALUES: Final = 5_000
"""The most values a whole filter may carry: each list counts its length, any other operand one.

Far below the bound-parameter limits of SQLite (32,766) and PostgreSQL (65,535)."""
MAX_CONDITIONS: Final = 64
"""The most conditions a filter may hold, counting those a tier store adds for its scope (two).

A document can hardly reach it (each field takes each operator once); filters combined with
:meth:`Filter.and_` can, and each condition on tags costs the database planner a join."""


@attrs.frozen
class Condition:
    """One validated test on one field.

    ``value`` is already normalized: enums are enum members, membership operators carry a
    tuple, datetimes are aware UTC. For tags, ``EQ``/``NE`` mean "contains"/"does not
    contain" the tag, ``IN`` any-of, ``NIN`` none-of, ``ALL`` all-of, and ``EXISTS`` whether the
    item has any tag at all.
    """

    field: str
    op: Op
    value: Any

    @property
    def spec(self) -> FieldSpec:
        """The field's specification."""
        return FIELDS[self.field]


@attrs.frozen
class Filter:
    """A conjunction of conditions; the empty filter matches every item."""

    conditions: tuple[Condition, ...] = ()
    _tests: tuple[tuple[str, Callable[[Any, Any], bool], Any], ...] = attrs.field(
        init=False, eq=False, repr=False
    )

    def __attrs_post_init__(self) -> None:
        _check_size(self.conditions)
        # Resolve each condition's test once: matches() runs per item on hot paths. A
        # membership list becomes a set, so a long $in or $nin (a fork's hidden ids) costs one
        # lookup per item rather than a pass over the list.
        tests = tuple(
            (
                c.field,
                (_TAG_TESTS if c.spec.kind is FieldKind.TAGS else _SCALAR_TESTS)[c.op],
                frozenset(c.value)
                if c.op in (Op.IN, Op.NIN) and c.spec.kind is not FieldKind.TAGS
                else c.value,
            )
            for c in self.conditions
        )
        object.__setattr__(self, "_tests", tests)

    def and_(self, other: Filter) -> Filter:
        """Both filters at once (how tier stores pin a caller's filter to their scope)."""
        return Filter(self.conditions + other.conditions)

    def matches(self, item: ContextItem) -> bool:
        """Evaluate the filter on ``item`` in Python (the reference semantics)."""
        for field, test, expected in self._tests:  # noqa: SIM110 - no generator per item (hot path)
            if not test(getattr(item, field), expected):
                return False
        return True

    def fields(self) -> frozenset[str]:
        """The fields the filter tests."""
        return frozenset(condition.field for condition in self.conditions)


FilterInput = Mapping[str, Any] | Filter | None
"""What backend methods accept as ``filters``: a document, a parsed filter, or ``None`` (all)."""


# ----------------------------------------------------------------------------- parsing


def parse_filter(filters: FilterInput) -> Filter:
    """Validate a filter document into a :class:`Filter` (a parsed one passes through)."""
    if filters is None:
        return Filter()
    if isinstance(filters, Filter):
        return filters
    if not isinstance(filters, Mapping):
        raise FilterError(
            f"filters must be a dict, got {type(filters).__name__}", field=None, value=filters
        )
    conditions: list[Condition] = []
    for field, value in filters.items():
        spec = _field(field)
        if isinstance(value, Mapping):
            if not value:
                raise FilterError(
                    f"empty operator document for {field!r}", field=field, value=value
                )
            for op_name, operand in value.items():
                conditions.append(_condition(spec, _operator(field, op_name), operand))
        elif isinstance(value, list | tuple):
            if spec.kind is not FieldKind.TAGS:
                raise FilterError(
                    f"a list value means any-of only on tags; use {{'$in': [...]}} for {field!r}",
                    field=field,
                    value=value,
                )
            conditions.append(_condition(spec, Op.IN, value))
        else:
            conditions.append(_condition(spec, Op.EQ, value))
    return Filter(tuple(conditions))


def _field(field: object) -> FieldSpec:
    if not isinstance(field, str) or field not in FIELDS:
        known = ", ".join(sorted(FIELDS))
        raise FilterError(f"unknown filter field {field!r}; known: {known}", field=str(field))
    return FIELDS[field]


def _operator(field: str, op_name: object) -> Op:
    try:
        return Op(cast("str", op_name))
    except ValueError:
        known = ", ".join(op.value for op in Op)
        raise FilterError(
            f"unknown operator {op_name!r} on {field!r}; known: {known}",
            field=field,
            value=op_name,
        ) from None


def _condition(spec: FieldSpec, op: Op, operand: Any) -> Condition:
    field = spec.name
    if op is Op.EXISTS:
        if not isinstance(operand, bool):
            raise FilterError(
                f"$exists on {field!r} takes true or false", field=field, value=operand
            )
        return Condition(field, op, operand)
    if spec.kind is FieldKind.TAGS:
        return _tags_condition(spec, op, operand)
    if op is Op.ALL:
        raise FilterError(f"$all applies to tags only, not {field!r}", field=field, value=operand)
    if op in _MEMBERSHIP:
        if not isinstance(operand, list | tuple | set | frozenset):
            raise FilterError(f"{op} on {field!r} takes a list", field=field, value=operand)
        _check_list(field, op, len(operand))
        return Condition(field, op, tuple(_scalar(spec, op, v) for v in operand))
    if operand is None:
        return _null_condition(spec, op)
    if op in _COMPARISONS and spec.kind in {FieldKind.STRING, FieldKind.ENUM}:
        raise FilterError(
            f"{op} compares numbers and datetimes; {field!r} is a {spec.kind.value}",
            field=field,
            value=operand,
        )
    return Condition(field, op, _scalar(spec, op, operand))


def _null_condition(spec: FieldSpec, op: Op) -> Condition:
    if op not in {Op.EQ, Op.NE}:
        raise FilterError(f"{op} on {spec.name!r} cannot compare with null", field=spec.name)
    if not spec.nullable:
        raise FilterError(
            f"{spec.name!r} is never null; a null test on it is always decided", field=spec.name
        )
    return Condition(spec.name, op, None)


def _tags_condition(spec: FieldSpec, op: Op, operand: Any) -> Condition:
    field = spec.name
    if op in {Op.EQ, Op.NE}:
        return Condition(field, op, _tag(operand))
    if op in _MEMBERSHIP:
        if not isinstance(operand, list | tuple | set | frozenset):
            raise FilterError(f"{op} on tags takes a list of tags", field=field, value=operand)
        _check_list(field, op, len(operand))
        return Condition(field, op, tuple(dict.fromkeys(_tag(tag) for tag in operand)))
    raise FilterError(f"{op} does not apply to tags", field=field, value=operand)


def _check_list(field: str, op: Op, size: int) -> None:
    """Refuse a list past :data:`MAX_LIST_VALUES` (before its values are even looked at)."""
    if size > MAX_LIST_VALUES:
        raise FilterTooLargeError(
            f"{op} on {field!r} lists {size} values; a list holds at most {MAX_LIST_VALUES}",
            field=field,
            limit=MAX_LIST_VALUES,
            size=size,
        )


def _check_size(conditions: tuple[Condition, ...]) -> None:
    """Refuse a filter past the size limits (see the module docstring for why)."""
    if len(conditions) > MAX_CONDITIONS:
        raise FilterTooLargeError(
            f"the filter has {len(conditions)} conditions; a filter holds at most {MAX_CONDITIONS}",
            field=None,
            limit=MAX_CONDITIONS,
            size=len(conditions),
        )
    values = 0
    for condition in conditions:
        if condition.op in _MEMBERSHIP:
            _check_list(condition.field, condition.op, len(condition.value))
            values += len(condition.value)
        else:
            values += 1
    if values > MAX_VALUES:
        raise FilterTooLargeError(
            f"the filter carries {values} values; a filter carries at most {MAX_VALUES}",
            field=None,
            limit=MAX_VALUES,
            size=values,
        )


def _tag(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise FilterError(
            f"a tag must be a non-empty string, got {value!r}", field="tags", value=value
        )
    return _validate.text("tags", value, error=FilterError)


def _scalar(spec: FieldSpec, op: Op, value: Any) -> Any:
    field = spec.name
    if spec.kind is FieldKind.STRING:
        if not isinstance(value, str):
            raise FilterError(f"{field!r} takes strings, got {value!r}", field=field, value=value)
        return _validate.text(field, value, error=FilterError)
    if spec.kind is FieldKind.ENUM:
        assert spec.enum_type is not None  # noqa: S101 - FIELDS guarantees it
        try:
            return spec.enum_type(value)
        except ValueError:
            allowed = ", ".join(member.value for member in spec.enum_type)
            raise FilterError(
                f"{field!r} takes one of {allowed}, got {value!r}", field=field, value=value
            ) from None
    if spec.kind is FieldKind.NUMBER:
        if isinstance(value, int) and not isinstance(value, bool):
            if op in _MEMBERSHIP:
                # A listed integer no column holds simply equals nothing (backends leave it out).
                return value
            # A bound is bound in its column's type, which holds every stored number.
            return _validate.integer(
                field, value, minimum=-spec.max_int - 1, maximum=spec.max_int, error=FilterError
            )
        if not isinstance(value, float) or math.isnan(value):
            raise FilterError(f"{field!r} takes numbers, got {value!r}", field=field, value=value)
        return value
    # DATETIME
    if not isinstance(value, datetime):
        raise FilterError(
            f"{op} on {field!r} takes a timezone-aware datetime, got {value!r}",
            field=field,
            value=value,
        )
    return _validate.aware(field, value, error=FilterError)


# ----------------------------------------------------------------------------- evaluation


_TAG_TESTS: Final[Mapping[Op, Callable[[tuple[str, ...], Any], bool]]] = {
    Op.EQ: lambda tags, tag: tag in tags,
    Op.NE: lambda tags, tag: tag not in tags,
    Op.IN: lambda tags, wanted: any(tag in tags for tag in wanted),
    Op.NIN: lambda tags, wanted: not any(tag in tags for tag in wanted),
    Op.ALL: lambda tags, wanted: all(tag in tags for tag in wanted),
    Op.EXISTS: lambda tags, exists: bool(tags) is exists,
}

_SCALAR_TESTS: Final[Mapping[Op, Callable[[Any, Any], bool]]] = {
    Op.EQ: operator.eq,
    Op.NE: operator.ne,
    Op.IN: lambda actual, wanted: actual in wanted,
    Op.NIN: lambda actual, wanted: actual not in wanted,
    Op.EXISTS: lambda actual, exists: (actual is not None) is exists,
    # Comparisons never match a null, as in SQL.
    Op.GT: lambda actual, bound: actual is not None and actual > bound,
    Op.GTE: lambda actual, bound: actual is not None and actual >= bound,
    Op.LT: lambda actual, bound: actual is not None and actual < bound,
    Op.LTE: lambda actual, bound: actual is not None and actual <= bound,
}


# ----------------------------------------------------------------------------- ordering


ORDER_FLIP_RELEASE: Final = "0.2.0"
"""The release from which a bare ``"field"`` sorts ascending (until then: descending)."""


def _orderable(name: object, given: object) -> str:
    """``name`` if ``order_by`` may sort by it, else a :class:`FilterError` quoting ``given``."""
    if not isinstance(name, str) or not name:
        raise FilterError(
            f"order_by must name a field, got {given!r}", field="order_by", value=given
        )
    if name not in FIELDS:
        known = ", ".join(sorted(FIELDS))
        raise FilterError(
            f"cannot order by unknown field {name!r}; known: {known}",
            field="order_by",
            value=given,
        )
    if not FIELDS[name].orderable:
        raise FilterError(f"cannot order by {name!r}", field="order_by", value=given)
    return name


def _check_field(_: Order, __: attrs.Attribute[str], value: object) -> None:
    _orderable(value, value)


def _check_direction(_: Order, __: attrs.Attribute[bool], value: object) -> None:
    if not isinstance(value, bool):
        raise FilterError(
            f"an Order's descending must be a bool, got {value!r}",
            field="order_by",
            value=value,
        )


@attrs.frozen
class Order:
    """A validated ``order_by``: one field, a direction, id ascending to break ties.

    Every backend sorts by this value, whatever spelling the caller used; it is also what a
    caller passes as ``order_by`` to say the direction outright. Build one with
    :meth:`asc` or :meth:`desc`; a field that cannot be ordered by is a
    :class:`~agent_engine.errors.FilterError` however the value is built.
    """

    field: str = attrs.field(validator=_check_field)
    descending: bool = attrs.field(validator=_check_direction)

    @classmethod
    def asc(cls, field: str) -> Order:
        """Smallest (oldest, least important) first."""
        return cls(field, descending=False)

    @classmethod
    def desc(cls, field: str) -> Order:
        """Largest (newest, most important) first."""
        return cls(field, descending=True)

    def sort(self, items: Iterable[ContextItem]) -> list[ContextItem]:
        """Sort ``items``: nulls last in either direction, ties by id ascending."""
        present: list[ContextItem] = []
        missing: list[ContextItem] = []
        for item in items:
            (missing if getattr(item, self.field) is None else present).append(item)
        present.sort(key=lambda item: item.id)
        present.sort(key=lambda item: getattr(item, self.field), reverse=self.descending)
        missing.sort(key=lambda item: item.id)
        return present + missing


OrderInput = str | Order
"""What ``order_by`` accepts: an :class:`Order`, or a string :func:`parse_order` reads."""


def parse_order(order_by: object) -> Order:
    """Parse an ``order_by`` once, for every backend (``docs/filters.md``, "Ordering").

    * an :class:`Order` stands as given;
    * ``"-field"`` sorts descending and ``"+field"`` ascending, the convention of SQL and of
      every ORM;
    * a bare ``"field"`` sorts descending, its old meaning, with a
      :class:`DeprecationWarning`: from :data:`ORDER_FLIP_RELEASE` it sorts ascending, as
      the usual convention has it, so a caller whose results would flip is told now, while
      they are still the ones it was written for. (``"-field"`` sorted ascending before this
      release: that meaning could not be kept beside the usual one.)

    A malformed ``order_by`` raises :class:`~agent_engine.errors.FilterError` and never warns.
    """
    if isinstance(order_by, Order):
        return order_by
    if not isinstance(order_by, str):
        raise FilterError(
            f"order_by must be a field name or an Order, got {order_by!r}",
            field="order_by",
            value=order_by,
        )
    sign = order_by[:1] if order_by.startswith(("+", "-")) else ""
    name = _orderable(order_by.removeprefix(sign), order_by)
    if sign == "+":
        return Order.asc(name)
    if sign == "-":
        return Order.desc(name)
    _deprecated(
        f"order_by={order_by!r} sorts descending, but from agent_engine "
        f"{ORDER_FLIP_RELEASE} it will sort ascending, as in SQL and ORMs; write "
        f"order_by='-{name}' to keep descending, or order_by='+{name}' for ascending"
    )
    return Order.desc(name)


_PACKAGE: Final = str(Path(__file__).parent) + os.sep


def _deprecated(message: str) -> None:
    """Warn about the caller's code: the first frame outside agent_engine.

    Python shows a :class:`DeprecationWarning` by default only when it is attributed to
    ``__main__``, and a warning pointing into this package would name a line the reader cannot
    change. Python 3.12's ``skip_file_prefixes`` does this; 3.11 needs the walk.
    """
    level = 1
    frame: FrameType | None = sys._getframe(1)  # noqa: SLF001 - the only way to count frames cheaply
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        level += 1
        frame = frame.f_back
    warnings.warn(message, DeprecationWarning, stacklevel=level + 1)
