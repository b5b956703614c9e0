"""Conversion between :class:`~agent_engine.models.ContextItem` and table rows.

Vectors are stored as little-endian float32 bytes (4 bytes per dimension, exact), times as
integer microseconds since the epoch, JSON values as compact text.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from agent_engine.models import ContextItem, Provenance, Status, Tier
from agent_engine.serde import from_dict, to_dict

__all__ = ["decode_time", "encode_time", "item_row", "row_item", "tag_rows"]

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
        "embedding": None
        if item.embedding is None
        else np.asarray(item.embedding, dtype="<f4").tobytes(),
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
    fields = (
        ("id", item_id),
        ("kind", kind),
        ("text", text),
        ("tier", _TIERS[tier]),
        ("namespace", namespace),
        ("source", source),
        ("session", session),
        ("timestamp", _EPOCH + timedelta(microseconds=timestamp)),
        ("tags", tuple(json.loads(tags)) if tags != "[]" else ()),
        ("importance", float(importance)),
        ("token_cost", token_cost),
        ("payload", json.loads(payload) if payload != "{}" else {}),
        ("embedding", embedding),
        ("status", _STATUSES[status]),
        ("access_count", access_count),
        ("last_accessed_at", None if last_accessed_at is None else decode_time(last_accessed_at)),
        ("expires_at", None if expires_at is None else decode_time(expires_at)),
        (
            "provenance",
            None if provenance is None else from_dict(Provenance, json.loads(provenance)),
        ),
        ("fingerprint", fingerprint),
    )
    item = object.__new__(ContextItem)
    for name, value in fields:
        object.__setattr__(item, name, value)
    return item
