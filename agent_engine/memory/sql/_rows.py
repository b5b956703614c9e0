"""Conversion between :class:`~agent_engine.models.ContextItem` and table rows.

Vectors are stored as little-endian float32 bytes (4 bytes per dimension, exact), times as
integer microseconds since the epoch, JSON values as compact text.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from agent_engine.models import ContextItem, Provenance
from agent_engine.serde import from_dict, to_dict

__all__ = ["decode_time", "encode_time", "item_row", "row_item", "tag_rows"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


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
    """Rebuild the item stored in an ``ae_items`` row."""
    embedding = None if row.embedding is None else np.frombuffer(row.embedding, dtype="<f4")
    return ContextItem(
        id=row.id,
        kind=row.kind,
        text=row.text,
        tier=row.tier,
        namespace=row.namespace,
        source=row.source,
        session=row.session,
        timestamp=decode_time(row.timestamp),
        tags=json.loads(row.tags),
        importance=row.importance,
        token_cost=row.token_cost,
        payload=json.loads(row.payload),
        embedding=embedding,
        status=row.status,
        access_count=row.access_count,
        last_accessed_at=None
        if row.last_accessed_at is None
        else decode_time(row.last_accessed_at),
        expires_at=None if row.expires_at is None else decode_time(row.expires_at),
        provenance=None
        if row.provenance is None
        else from_dict(Provenance, json.loads(row.provenance)),
    )
