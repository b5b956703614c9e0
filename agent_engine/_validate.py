"""The checks a value passes where it enters agent_engine, written once.

Model converters run them at construction; backends, filters, tier stores and the assembler
run them on the raw arguments they take (ids, queries, limits, datetimes, lists of ids). A
value is therefore refused the same way wherever it comes in: a
:class:`~agent_engine.errors.ValidationError` (or the subclass the caller asks for) that names
the field, raised before anything is written.

The limits are what every backend can store and every call can compute with:

* text is a ``str`` without NUL and encodable as UTF-8 (no lone surrogates): SQLite and
  PostgreSQL drivers cannot bind anything else, and embedders and hashes encode it;
* integers fit SQL ``BIGINT`` (signed 64-bit), counts stored in ``INTEGER`` columns
  (``token_cost``, ``access_count``) fit signed 32-bit;
* numbers are finite ``int``/``float`` (ints beyond a float's range are refused, not rounded);
* vectors are finite float32 whose squared length a float32 holds (below about 3.4e38), so
  cosine similarity can normalize them;
* datetimes are timezone-aware and convertible to UTC;
* JSON values (payloads, task metadata) nest at most :data:`MAX_JSON_DEPTH` containers deep,
  checked without recursion, so no input reaches Python's recursion limit.
"""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Final, TypeVar, cast

import numpy as np
import numpy.typing as npt

from agent_engine.errors import ValidationError

__all__ = [
    "MAX_COUNT",
    "MAX_ID_LENGTH",
    "MAX_INT",
    "MAX_JSON_DEPTH",
    "MIN_INT",
    "aware",
    "identifier",
    "integer",
    "json_object",
    "json_value",
    "real",
    "sequence",
    "text",
    "vector",
]

MAX_ID_LENGTH: Final = 255
"""Ids, namespaces, kinds, sources, sessions and tags fit an indexed SQL column everywhere."""
MAX_INT: Final = 2**63 - 1
"""The largest integer a SQL ``BIGINT`` (and SQLite's driver) takes."""
MIN_INT: Final = -(2**63)
"""The smallest integer a SQL ``BIGINT`` takes."""
MAX_COUNT: Final = 2**31 - 1
"""The largest count stored in an ``INTEGER`` column (PostgreSQL's is 32-bit)."""
MAX_JSON_DEPTH: Final = 64
"""How many containers deep a payload may nest (``{"a": [1]}`` is two deep)."""

_FLOAT32_MAX: Final = float(np.finfo(np.float32).max)

_Error = type[ValidationError]
_E = TypeVar("_E", bound=enum.StrEnum)
_T = TypeVar("_T")


def text(
    field: str, value: object, *, max_length: int | None = None, error: _Error = ValidationError
) -> str:
    """``value`` if it is storable text: a ``str`` without NUL, valid UTF-8, not too long."""
    if not isinstance(value, str):
        raise error(
            f"{field} must be a string, got {type(value).__name__}", field=field, value=value
        )
    if "\x00" in value:
        raise error(
            f"{field} contains a NUL character, which databases cannot store",
            field=field,
            value=value,
        )
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise error(
                f"{field} is not valid Unicode (a lone surrogate at position {exc.start})",
                field=field,
                value=value,
            ) from None
    if max_length is not None and len(value) > max_length:
        raise error(f"{field} is longer than {max_length} characters", field=field, value=value)
    return value


def identifier(
    field: str,
    value: object,
    *,
    max_length: int | None = MAX_ID_LENGTH,
    error: _Error = ValidationError,
) -> str:
    """``value`` if it is a usable key: storable text, not blank, no surrounding whitespace."""
    if not isinstance(value, str) or not value.strip():
        raise error(f"{field} must be a non-empty string, got {value!r}", field=field, value=value)
    text(field, value, max_length=max_length, error=error)
    if value != value.strip():
        raise error(
            f"{field} must not start or end with whitespace, got {value!r}",
            field=field,
            value=value,
        )
    return value


def integer(
    field: str,
    value: object,
    *,
    minimum: int = 0,
    maximum: int = MAX_INT,
    error: _Error = ValidationError,
) -> int:
    """``value`` if it is an ``int`` (not a bool) in ``[minimum, maximum]``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise error(f"{field} must be an integer, got {value!r}", field=field, value=value)
    if not minimum <= value <= maximum:
        raise error(
            f"{field} must be between {minimum} and {maximum}, got {value!r}",
            field=field,
            value=value,
        )
    return value


def real(field: str, value: object, *, error: _Error = ValidationError) -> float:
    """``value`` as a float if it is a finite ``int``/``float`` (not a bool) a float can hold."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise error(f"{field} must be a number, got {value!r}", field=field, value=value)
    try:
        number = float(value)
    except OverflowError:
        raise error(f"{field} is too large for a float", field=field, value=value) from None
    if not math.isfinite(number):
        raise error(f"{field} must be a finite number, got {value!r}", field=field, value=value)
    return number


def aware(field: str, value: object, *, error: _Error = ValidationError) -> datetime:
    """``value`` as an aware UTC datetime; naive ones and instants UTC cannot hold are refused."""
    if not isinstance(value, datetime):
        raise error(
            f"{field} must be a timezone-aware datetime, got {value!r}", field=field, value=value
        )
    try:
        offset = value.utcoffset()
        converted = None if offset is None else value.astimezone(UTC)
    except (OverflowError, ValueError):
        raise error(
            f"{field} is outside the range of UTC datetimes: {value!r}", field=field, value=value
        ) from None
    if converted is None:
        raise error(
            f"{field} must be timezone-aware (naive datetimes are ambiguous), got {value!r}",
            field=field,
            value=value,
        )
    return converted


def member(field: str, enum_type: type[_E], value: object) -> _E:
    """``value`` as a member of ``enum_type`` (a member or its value), naming the allowed ones."""
    try:
        return enum_type(cast("str", value))
    except ValueError:
        allowed = ", ".join(member.value for member in enum_type)
        raise ValidationError(
            f"{field} must be one of {allowed}; got {value!r}", field=field, value=value
        ) from None


def optional(field: str, kind: type[_T], value: object) -> _T | None:
    """``value`` if it is a ``kind`` or ``None`` (a setting that may be off), else an error."""
    if value is None or isinstance(value, kind):
        return value
    raise ValidationError(
        f"{field} must be a {kind.__name__} or None, got {type(value).__name__}",
        field=field,
        value=value,
    )


def sequence(field: str, value: object, *, error: _Error = ValidationError) -> list[Any]:
    """The elements of ``value``, which must be a collection (not ``None``, not one string)."""
    if value is None or isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise error(f"{field} must be a list, got {type(value).__name__}", field=field, value=value)
    return list(value)


def json_value(
    field: str, value: object, *, max_depth: int = MAX_JSON_DEPTH, error: _Error = ValidationError
) -> Any:
    """A detached copy of ``value`` after proving it is storable JSON.

    The nesting is measured first, without recursion, so a deep value is refused before the
    encoder could hit the interpreter's recursion limit (a cycle counts as too deep). The copy
    goes through canonical JSON, which also refuses NaN, infinities and non-JSON types, and
    its text must encode as UTF-8. ``max_depth`` is lower for a value that will be stored
    inside another container.
    """
    _check_depth(field, value, max_depth, error)
    try:
        encoded = json.dumps(value, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise error(f"{field} is not JSON-serializable: {exc}", field=field, value=value) from None
    if not encoded.isascii():
        try:
            encoded.encode("utf-8")
        except UnicodeEncodeError:
            raise error(
                f"{field} holds a string that is not valid Unicode (a lone surrogate)",
                field=field,
                value=value,
            ) from None
    return json.loads(encoded)


def json_object(field: str, value: object, *, error: _Error = ValidationError) -> dict[str, Any]:
    """:func:`json_value` for a JSON object (any mapping; its top level is copied to a dict)."""
    if not isinstance(value, Mapping):
        raise error(
            f"{field} must be a mapping, got {type(value).__name__}", field=field, value=value
        )
    copied = json_value(field, value if isinstance(value, dict) else dict(value), error=error)
    if not isinstance(copied, dict):  # pragma: no cover - a dict always dumps to an object
        raise error(f"{field} must be a JSON object", field=field, value=value)
    return copied


def _check_depth(field: str, value: object, max_depth: int, error: _Error) -> None:
    pending: list[tuple[object, int]] = [(value, 1)]
    while pending:
        current, depth = pending.pop()
        if isinstance(current, dict):
            children: Iterable[object] = current.values()
        elif isinstance(current, list | tuple):
            children = current
        else:
            continue
        if depth > max_depth:
            raise error(f"{field} nests deeper than {max_depth} levels", field=field, value=value)
        pending.extend((child, depth + 1) for child in children)


def vector(
    field: str, value: object, *, error: _Error = ValidationError
) -> npt.NDArray[np.float32]:
    """A copy of ``value`` as a finite, non-empty 1-D float32 array (overflow is refused)."""
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            array = np.array(value, dtype=np.float32)
    except (TypeError, ValueError, OverflowError):
        raise error(f"{field} must be a sequence of numbers", field=field, value=value) from None
    if array.ndim != 1 or array.size == 0:
        raise error(
            f"{field} must be a non-empty 1-D vector, got shape {array.shape}",
            field=field,
            value=value,
        )
    if not np.isfinite(array).all():
        raise error(
            f"{field} contains NaN or infinity (or a number beyond float32)",
            field=field,
            value=value,
        )
    wide = array.astype(np.float64)
    if float(np.dot(wide, wide)) >= _FLOAT32_MAX:
        # Cosine similarity normalizes in float32: a squared length past its range is infinite.
        raise error(
            f"{field} is too long to normalize in float32 (its squared length overflows)",
            field=field,
            value=value,
        )
    return array
