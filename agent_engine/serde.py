"""The one place that knows how models become JSON-safe dicts and back.

Models carry no ``to_dict`` methods; every layer that crosses a JSON or storage boundary
(SQL rows, the CLI's ``--json``, benchmark reports) goes through :func:`to_dict` and
:func:`from_dict`. Datetimes travel as ISO-8601 UTC strings, enums as their values, and
embeddings as base64 of little-endian float32 bytes (a quarter of the size of a JSON list and
exact), so a round trip returns an equal value.
"""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Any, TypeVar

import cattrs
import numpy as np
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override
from cattrs.preconf.json import make_converter

from agent_engine.errors import ValidationError
from agent_engine.models import TierShares, Vector

__all__ = ["decode_vector", "encode_vector", "from_dict", "to_dict"]

T = TypeVar("T")


def encode_vector(vector: Vector) -> str:
    """Encode a float32 vector compactly and exactly as base64 text."""
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


def decode_vector(text: str) -> Vector:
    """Decode :func:`encode_vector` output."""
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError) as exc:
        raise ValidationError(
            f"embedding is not valid base64: {exc}", field="embedding", value=text
        ) from None
    if len(raw) % 4:
        raise ValidationError(
            "embedding bytes are not a whole number of float32 values",
            field="embedding",
            value=text,
        )
    return np.frombuffer(raw, dtype="<f4").astype(np.float32)


def _parse_datetime(value: Any, _: type) -> datetime:
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str):
        raise ValidationError(f"expected an ISO-8601 datetime, got {value!r}", value=value)
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise ValidationError(f"not an ISO-8601 datetime: {value!r}", value=value) from None


def _structure_vector(value: Any, _: type) -> Vector | None:
    if value is None:
        return None
    if isinstance(value, str):
        return decode_vector(value)
    return np.asarray(value, dtype=np.float32)


def _make_converter() -> cattrs.Converter:
    converter = make_converter(detailed_validation=False)
    converter.register_unstructure_hook(datetime, lambda value: value.isoformat())
    converter.register_structure_hook(datetime, _parse_datetime)
    vector_types = (Vector, Vector | None, np.ndarray)
    converter.register_unstructure_hook_func(
        lambda hint: hint in vector_types,
        lambda value: None if value is None else encode_vector(value),
    )
    converter.register_structure_hook_func(lambda hint: hint in vector_types, _structure_vector)
    # ``global`` is a keyword, so the attribute is ``global_``; the wire name is the plain word.
    converter.register_unstructure_hook(
        TierShares,
        make_dict_unstructure_fn(
            TierShares,
            converter,
            global_=override(rename="global"),
            # A split that leaves the session unsaid reads as it did before sessions.
            session=override(omit_if_default=True),
        ),
    )
    converter.register_structure_hook(
        TierShares,
        make_dict_structure_fn(TierShares, converter, global_=override(rename="global")),
    )
    return converter


_converter = _make_converter()


def to_dict(value: Any) -> dict[str, Any]:
    """Turn a model into a JSON-safe dict."""
    result = _converter.unstructure(value)
    if not isinstance(result, dict):  # pragma: no cover - every model is an attrs class
        raise ValidationError(f"{type(value).__name__} does not unstructure to a dict")
    return result


def from_dict(cls: type[T], data: Any) -> T:
    """Build a model from :func:`to_dict` output, validating every field on the way."""
    if not isinstance(data, dict):
        raise ValidationError(
            f"expected a dict for {cls.__name__}, got {type(data).__name__}", value=data
        )
    try:
        return _converter.structure(data, cls)
    except ValidationError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValidationError(f"cannot build {cls.__name__}: {exc!r}", value=data) from exc
