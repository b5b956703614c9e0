"""The layout of ``ae_items`` and the conversion between its rows and ContextItem.

The table has one column per :class:`~agent_engine.models.ContextItem` field, named and
ordered as the fields are. Each field's column and codec follow from its type (texts, counts,
numbers, times, enums), save for the few fields named in ``_BY_NAME`` (the scoped id, the
unbounded text, the JSON and vector fields). A model field that neither rule covers stops
the import with a :class:`TypeError` naming it, so the model, the table and the conversion
cannot drift apart; a new field then needs its rule (if any) here and a migration.

Vectors are stored as little-endian float32 bytes (4 bytes per dimension, exact), times as
integer microseconds since the epoch, enums by value, JSON values as compact text.
"""

from __future__ import annotations

import enum
import json
import linecache
import operator
import types
import typing
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs
import numpy as np
import sqlalchemy as sa

from agent_engine.models import MAX_ITEM_ID_LENGTH, ContextItem, Origin, Provenance, Vector
from agent_engine.serde import from_dict, to_dict

__all__ = [
    "ITEM_COLUMNS",
    "ItemColumn",
    "decode_time",
    "encode_json",
    "encode_time",
    "encode_vector",
    "item_columns",
    "item_layout",
    "item_row",
    "row_item",
    "tag_rows",
    "text_type",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)

Codec = Callable[[Any], Any]
"""One way of a field's conversion (never given ``None``: a null stays null)."""


def text_type(length: int | None = None) -> sa.types.TypeEngine[str]:
    """A text column that sorts by code point on every dialect (``COLLATE "C"`` on PG)."""
    base: sa.types.TypeEngine[str] = sa.String(length) if length else sa.Text()
    exact: sa.types.TypeEngine[str] = (
        sa.String(length, collation="C") if length else sa.Text(collation="C")
    )
    return base.with_variant(exact, "postgresql")


def encode_time(value: datetime) -> int:
    """Microseconds since the epoch: exact, and ordered as the datetimes are."""
    return (value - _EPOCH) // _MICROSECOND


def decode_time(value: int) -> datetime:
    """The aware UTC datetime of :func:`encode_time`."""
    return _EPOCH + timedelta(microseconds=value)


def encode_json(value: Any) -> str:
    """JSON as stored in item columns: compact, non-ASCII kept as is."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def encode_vector(vector: Vector) -> bytes:
    """A vector as stored: little-endian float32 bytes."""
    return np.asarray(vector, dtype="<f4").tobytes()


def _decode_vector(value: bytes) -> Vector:
    vector = np.frombuffer(value, dtype="<f4").astype(np.float32)
    vector.flags.writeable = False
    return vector


def _decode_payload(value: str) -> dict[str, Any]:
    return json.loads(value) if value != "{}" else {}


def _encode_provenance(value: Provenance) -> str:
    return encode_json(to_dict(value))


def _decode_provenance(value: str) -> Provenance:
    return from_dict(Provenance, json.loads(value))


def _encode_origins(value: tuple[Origin, ...]) -> str:
    return encode_json([to_dict(origin) for origin in value])


def _decode_origins(value: str) -> tuple[Origin, ...]:
    return tuple(from_dict(Origin, entry) for entry in json.loads(value)) if value != "[]" else ()


_TAG_TUPLES: dict[str, tuple[str, ...]] = {"[]": ()}
_TAG_TUPLES_KEPT = 4096


def _decode_tags(encoded: str) -> tuple[str, ...]:
    """Decoded tags, shared between rows.

    A store has few distinct tag sets, and tuples of strings are immutable, so one decoding
    serves every row that carries the same set.
    """
    tags = _TAG_TUPLES.get(encoded)
    if tags is None:
        tags = tuple(json.loads(encoded))
        if len(_TAG_TUPLES) < _TAG_TUPLES_KEPT:
            _TAG_TUPLES[encoded] = tags
    return tags


@attrs.frozen
class _Rule:
    """A column type and the codecs between a field's values and the column's (``None``: as is)."""

    type: sa.types.TypeEngine[Any]
    encode: Codec | None = None
    decode: Codec | None = None
    primary_key: bool = False


_BY_NAME: dict[str, _Rule] = {
    # Tier stores qualify each id with its escaped namespace, so ids run long.
    "id": _Rule(text_type(MAX_ITEM_ID_LENGTH), primary_key=True),
    "text": _Rule(sa.Text()),
    "fingerprint": _Rule(text_type(64)),
    "tags": _Rule(sa.Text(), encode_json, _decode_tags),
    "payload": _Rule(sa.Text(), encode_json, _decode_payload),
    "embedding": _Rule(sa.LargeBinary(), encode_vector, _decode_vector),
    "provenance": _Rule(sa.Text(), _encode_provenance, _decode_provenance),
    "superseded_by": _Rule(text_type(MAX_ITEM_ID_LENGTH)),
    "merged_from": _Rule(sa.Text(), _encode_origins, _decode_origins),
}
"""The fields whose column or codec their type does not decide."""


_BY_TYPE: dict[object, _Rule] = {
    str: _Rule(text_type(255)),  # a label: a kind, a namespace, a source, a session
    int: _Rule(sa.Integer()),
    float: _Rule(sa.Float(), decode=float),
    datetime: _Rule(sa.BigInteger(), encode_time, decode_time),
}
"""The rule of every other field, by its type (enums aside: see :func:`_by_type`)."""


def _by_type(kind: object) -> _Rule | None:
    """The rule of a field of type ``kind``: an enum is stored by value."""
    if isinstance(kind, type) and issubclass(kind, enum.StrEnum):
        members: dict[str, enum.StrEnum] = {member.value: member for member in kind}
        return _Rule(text_type(16), operator.attrgetter("value"), members.__getitem__)
    return _BY_TYPE.get(kind)


@attrs.frozen
class ItemColumn:
    """Where one item field is stored: its column's type, and how values go in and out."""

    name: str
    type: sa.types.TypeEngine[Any]
    nullable: bool
    primary_key: bool
    encode: Codec | None
    decode: Codec | None

    def column(self) -> sa.Column[Any]:
        """A new column of this layout (a column belongs to one table)."""
        return sa.Column(self.name, self.type, primary_key=self.primary_key, nullable=self.nullable)


def _optional(hint: object) -> tuple[object, bool]:
    """``(type, nullable)`` of a field's type hint: ``X | None`` is a nullable ``X``."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [arg for arg in args if arg is not type(None)]
        return (rest[0] if len(rest) == 1 else hint), True
    return hint, False


def item_layout(cls: type[Any]) -> tuple[ItemColumn, ...]:
    """The column of each field of the attrs class ``cls``, in field order.

    Raises :class:`TypeError` naming the first field that no rule covers.
    """
    hints = typing.get_type_hints(cls)
    layout = []
    for field in attrs.fields(cls):
        kind, nullable = _optional(hints[field.name])
        rule = _BY_NAME.get(field.name) or _by_type(kind)
        if rule is None:
            raise TypeError(
                f"{cls.__name__}.{field.name} ({kind}) has no column in ae_items: give it a "
                f"rule in {__name__} and add the column in a migration"
            )
        layout.append(
            ItemColumn(field.name, rule.type, nullable, rule.primary_key, rule.encode, rule.decode)
        )
    return tuple(layout)


ITEM_COLUMNS: tuple[ItemColumn, ...] = item_layout(ContextItem)
"""The columns of ``ae_items``, one per :class:`ContextItem` field, in field order."""


def item_columns() -> list[sa.Column[Any]]:
    """New ``ae_items`` columns, in field order (for the table's declaration)."""
    return [column.column() for column in ITEM_COLUMNS]


def _compile(name: str, lines: list[str], namespace: dict[str, Any], doc: str) -> Any:
    """Compile generated source into a function, registered for tracebacks as attrs does."""
    source = "\n".join(lines) + "\n"
    filename = f"<{__name__}.{name} generated>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - built from the layout
    function = namespace[name]
    function.__doc__ = doc
    function.__module__ = __name__
    return function


def _coded(codec: str, value: str, nullable: bool, bound: str | None = None) -> str:
    """``codec`` applied to the expression ``value``, a null staying null.

    ``bound`` names ``value`` once evaluated, when it is an expression worth evaluating once.
    """
    if not nullable:
        return f"{codec}({value})"
    if bound is None:
        return f"None if {value} is None else {codec}({value})"
    return f"None if ({bound} := {value}) is None else {codec}({bound})"


def _converters(layout: tuple[ItemColumn, ...]) -> tuple[Any, Any]:
    """``(item_row, row_item)`` of ``layout``: straight-line code, one line per column.

    The read path turns every row of every query into an item, so the conversion is generated
    from the layout, as attrs generates a class's ``__init__`` from its fields: it runs as
    fast as code written out by hand, and cannot leave a column out or take them out of order.
    Rows were validated when they were written (every write goes through ``ContextItem``), so
    ``row_item`` sets the fields through the slots' own descriptors without re-running the
    item's converters, and skips the frozen class's ``__setattr__`` guard.
    """
    namespace: dict[str, Any] = {"_ContextItem": ContextItem, "_new": object.__new__}
    unpacked = ", ".join(f"v{n}" for n in range(len(layout)))
    encoded = []
    decoded = []
    for n, column in enumerate(layout):
        namespace[f"_set{n}"] = getattr(ContextItem, column.name).__set__
        value = f"item.{column.name}"
        if column.encode is not None:
            namespace[f"_encode{n}"] = column.encode
            value = _coded(f"_encode{n}", value, column.nullable, f"v{n}")
        encoded.append(f"        {column.name!r}: {value},")
        value = f"v{n}"
        if column.decode is not None:
            namespace[f"_decode{n}"] = column.decode
            value = _coded(f"_decode{n}", value, column.nullable)
        decoded.append(f"    _set{n}(item, {value})")
    item_row = _compile(
        "item_row",
        ["def item_row(item):", "    return {", *encoded, "    }"],
        namespace,
        "The ``ae_items`` row of ``item``.",
    )
    row_item = _compile(
        "row_item",
        [
            "def row_item(row):",
            f"    {unpacked}, = row",
            "    item = _new(_ContextItem)",
            *decoded,
            "    return item",
        ],
        namespace,
        "Rebuild the item stored in an ``ae_items`` row (all columns, in table order).",
    )
    return item_row, row_item


item_row: Callable[[ContextItem], dict[str, Any]]
row_item: Callable[[Any], ContextItem]
item_row, row_item = _converters(ITEM_COLUMNS)


def tag_rows(items: list[ContextItem]) -> list[dict[str, str]]:
    """The ``ae_item_tags`` rows of ``items``."""
    return [{"item_id": item.id, "tag": tag} for item in items for tag in item.tags]
