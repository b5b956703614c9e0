"""The ``ae_items`` layout follows ContextItem's fields, and rows convert both ways exactly."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import attrs
import numpy as np
import pytest
import sqlalchemy as sa

from agent_engine.memory.sql._rows import (
    ITEM_COLUMNS,
    item_layout,
    item_row,
    row_item,
    tag_rows,
)
from agent_engine.memory.sql._schema import items, metadata
from agent_engine.models import ContextItem, Provenance, Status, Tier

T0 = datetime(2025, 1, 1, 12, 30, 15, 123456, tzinfo=UTC)

FULL = ContextItem(
    id="project:p1/decision-1",
    kind="decision",
    text="Use PostgreSQL — «exact» ordering",
    tier=Tier.GLOBAL,
    namespace="global:u1",
    source="planner",
    session="run-7",
    timestamp=T0,
    tags=("db", "ünïcode"),
    importance=0.75,
    token_cost=42,
    payload={"why": ["speed", 1, None, {"nested": True}]},
    embedding=np.array([0.5, -1.25, 3.0], dtype=np.float32),
    status=Status.PINNED,
    access_count=3,
    last_accessed_at=T0 + timedelta(days=1),
    expires_at=T0 + timedelta(days=30),
    provenance=Provenance("task-item", Tier.TASK, "task:p1:u1:t1", T0, reason="confirmed"),
)
BARE = ContextItem(id="bare", kind="note", payload={}, timestamp=T0)


@attrs.frozen
class _WithUnmappedField:
    id: str
    extra: set[int]


class TestLayout:
    def test_every_field_has_its_column_in_field_order(self):
        """ae_items has exactly one column per ContextItem field, named and ordered alike."""
        fields = [field.name for field in attrs.fields(ContextItem)]
        assert [column.name for column in ITEM_COLUMNS] == fields
        assert list(items.c.keys()) == fields

    def test_a_field_without_a_rule_is_refused_by_name(self):
        """A model field that no rule maps stops the layout, naming the field."""
        with pytest.raises(TypeError, match=r"_WithUnmappedField\.extra .*has no column"):
            item_layout(_WithUnmappedField)

    def test_nullable_columns_are_the_optional_fields(self):
        """A column is nullable exactly when its field's type admits None."""
        nullable = {column.name for column in items.c if column.nullable}
        assert nullable == {
            "token_cost",
            "embedding",
            "last_accessed_at",
            "expires_at",
            "provenance",
            "key",
            "valid_from",
            "valid_to",
            "superseded_by",
            "archived_at",
            "archived_reason",
        }
        assert [column.name for column in items.primary_key.columns] == ["id"]


class TestConversion:
    @pytest.mark.parametrize("item", [pytest.param(FULL, id="full"), pytest.param(BARE, id="bare")])
    def test_rows_read_back_as_the_items_written(self, item):
        """item_row then row_item gives back an equal item, vector and fingerprint included."""
        engine = sa.create_engine("sqlite://")
        metadata.create_all(engine)
        with engine.begin() as connection:
            connection.execute(items.insert(), [item_row(item)])
            row = connection.execute(sa.select(items)).one()
        back = row_item(row)
        assert back == item
        assert back.fingerprint == item.fingerprint
        if item.embedding is None:
            assert back.embedding is None
        else:
            assert back.embedding.dtype == np.float32
            assert not back.embedding.flags.writeable
            np.testing.assert_array_equal(back.embedding, item.embedding)

    def test_rows_hold_encoded_values(self):
        """Enums by value, times as epoch microseconds, JSON compact, vectors as float32 bytes."""
        row: dict[str, Any] = item_row(FULL)
        assert row["tier"] == "global"
        assert row["status"] == "pinned"
        assert row["timestamp"] == int(T0.timestamp()) * 1_000_000 + 123456
        assert row["tags"] == '["db","ünïcode"]'
        assert row["embedding"] == np.array([0.5, -1.25, 3.0], dtype="<f4").tobytes()
        assert item_row(BARE)["provenance"] is None

    def test_tag_rows_name_each_tag_of_each_item(self):
        """One ae_item_tags row per (item, tag)."""
        assert tag_rows([FULL, BARE]) == [
            {"item_id": FULL.id, "tag": "db"},
            {"item_id": FULL.id, "tag": "ünïcode"},
        ]
