"""Conversion between :class:`~agent_engine.models.ContextItem` and table rows.

Vectors are stored as little-endian float32 bytes (4 bytes per dimension, exact), times as
integer microseconds since the epoch, JSON values as compact text.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from agent_engine.models import ContextItem, Provenance, Status, Tier, Vector
from agent_engine.serde import from_dict, to_dict

__all__ = ["decode_time", "encode_time", "encode_vector", "item_row", "row_item", "tag_rows"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_TIERS = {tier.value: tier for tier in Tier}
_STATUSES = {status.value: status for status in Status}


def encode_time(value: datetime) -> int:
    """Microseconds since the epoch: exact, and ordered as the datetimes are."""
    return (value - _EPOCH) // _MICROSECOND


def decode_time(value: int) -> datetime:
    """The aware UTC datetime of :func:`encode_time`."""
    return _EPOCH + timedelta(microseconds=value)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def encode_vector(vector: Vector) -> bytes:
    """A vector as stored: little-endian float32 bytes."""
    return np.asarray(vector, dtype="<f4").tobytes()


def item_row(item: ContextItem) -> dict[str, Any]:
    """The ``ae_items`` row of ``item``."""
    return {
        "id": item.id,
        "kind": item.kind,
        "text": item.text,
        "tier": item.tier.value,
        "namespace": item.namespace,
        "source": item.source,
        "session": item.session,
        "timestamp": encode_time(item.timestamp),
        "tags": _dumps(list(item.tags)),
        "importance": item.importance,
        "token_cost": item.token_cost,
        "payload": _dumps(item.payload),
        "embedding": None if item.embedding is None else encode_vector(item.embedding),
        "status": item.status.value,
        "access_count": item.access_count,
        "last_accessed_at": None
        if item.last_accessed_at is None
        else encode_time(item.last_accessed_at),
        "expires_at": None if item.expires_at is None else encode_time(item.expires_at),
        "provenance": None if item.provenance is None else _dumps(to_dict(item.provenance)),
        "fingerprint": item.fingerprint,
    }


def tag_rows(items: list[ContextItem]) -> list[dict[str, str]]:
    """The ``ae_item_tags`` rows of ``items``."""
    return [{"item_id": item.id, "tag": tag} for item in items for tag in item.tags]


def row_item(row: Any) -> ContextItem:
    """Rebuild the item stored in an ``ae_items`` row (all columns, in table order).

    Rows were validated when they were written (every write goes through ``ContextItem``), so
    the item is assembled without re-running its converters: reading is the hot path of every
    query, and conversion would cost more than the query itself.
    """
    (
        item_id,
        kind,
        text,
        tier,
        namespace,
        source,
        session,
        timestamp,
        tags,
        importance,
        token_cost,
        payload,
        vector,
        status,
        access_count,
        last_accessed_at,
        expires_at,
        provenance,
        fingerprint,
    ) = row
    embedding = None
    if vector is not None:
        embedding = np.frombuffer(vector, dtype="<f4").astype(np.float32)
        embedding.flags.writeable = False
    values = (
        item_id,
        kind,
        text,
        _TIERS[tier],
        namespace,
        source,
        session,
        _EPOCH + timedelta(microseconds=timestamp),
        _tags(tags),
        float(importance),
        token_cost,
        json.loads(payload) if payload != "{}" else {},
        embedding,
        _STATUSES[status],
        access_count,
        None if last_accessed_at is None else decode_time(last_accessed_at),
        None if expires_at is None else decode_time(expires_at),
        None if provenance is None else from_dict(Provenance, json.loads(provenance)),
        fingerprint,
    )
    item = object.__new__(ContextItem)
    for store, value in zip(_SETTERS, values, strict=True):
        store(item, value)
    return item


# The slots' own descriptors, in row order: setting through them skips the frozen class's
# ``__setattr__`` guard, which a per-field ``object.__setattr__`` would look up each time.
_SETTERS = tuple(
    getattr(ContextItem, name).__set__
    for name in (
        "id",
        "kind",
        "text",
        "tier",
        "namespace",
        "source",
        "session",
        "timestamp",
        "tags",
        "importance",
        "token_cost",
        "payload",
        "embedding",
        "status",
        "access_count",
        "last_accessed_at",
        "expires_at",
        "provenance",
        "fingerprint",
    )
)
_TAG_TUPLES: dict[str, tuple[str, ...]] = {"[]": ()}
_TAG_TUPLES_KEPT = 4096


def _tags(encoded: str) -> tuple[str, ...]:
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
