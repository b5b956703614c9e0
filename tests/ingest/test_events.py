"""An event is checked field by field when it is made, and keeps its identity through JSON."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agent_engine import Tier, ValidationError
from agent_engine.ingest import IngestEvent

NOW = datetime(2026, 11, 1, tzinfo=UTC)


class TestValidation:
    @pytest.mark.parametrize(
        ("data", "field"),
        [
            ({"kind": "note"}, "text"),
            ({"text": "x", "tier": "galaxy"}, "tier"),
            ({"text": "x", "importance": 3}, "importance"),
            ({"text": "x", "tags": "one"}, "tags"),
            ({"text": "x", "timestamp": "yesterday"}, "timestamp"),
            ({"text": "x", "timestamp": "2026-11-01T10:00:00"}, "timestamp"),  # naive
            ({"text": "x", "project": " padded "}, "project"),
            ({"text": "x", "tier": "task"}, "task"),
            ({"text": "x", "task": "t1"}, "task"),
            ({"text": "x", "tier": "session"}, "session"),
            ({"text": "x", "colour": "red"}, "colour"),
            ({"text": "x", "idempotency_key": ""}, "idempotency_key"),
            ({"text": "x", "kind": ""}, "kind"),
            ({"text": "a\x00b"}, "text"),
        ],
    )
    def test_a_bad_field_is_named(self, data, field):
        with pytest.raises(ValidationError) as raised:
            IngestEvent.from_mapping(data)
        assert raised.value.field == field

    @pytest.mark.parametrize("data", ["text", 3, None, ["text"]])
    def test_what_is_not_an_object_is_refused(self, data):
        with pytest.raises(ValidationError, match="JSON object"):
            IngestEvent.from_mapping(data)

    def test_a_line_that_is_not_json_is_refused(self):
        with pytest.raises(ValidationError, match="not JSON"):
            IngestEvent.from_json('{"text": ')


class TestIdentity:
    def test_json_round_trip_keeps_every_field(self):
        event = IngestEvent(
            "Deploys go out on Fridays",
            kind="decision",
            tier=Tier.TASK,
            project="alpha",
            user="ann",
            task="t7",
            idempotency_key="evt-1",
            importance=0.8,
            tags=("deploy",),
            payload={"why": "quiet day"},
            source="ann",
            session="s1",
            timestamp=NOW,
            key="deploy-day",
            expires_at=datetime(2027, 1, 1, tzinfo=UTC),
        )
        assert IngestEvent.from_json(event.to_json()) == event
        assert event.namespace == "task:alpha:ann:t7"

    def test_the_item_id_follows_scope_and_key(self):
        one = IngestEvent("x", project="alpha", idempotency_key="k")
        assert (
            IngestEvent("other text", project="alpha", idempotency_key="k").item_id == one.item_id
        )
        assert IngestEvent("x", project="beta", idempotency_key="k").item_id != one.item_id
        assert IngestEvent("x", project="alpha", idempotency_key="k2").item_id != one.item_id
        assert IngestEvent("x", tier="global", idempotency_key="k").item_id != one.item_id

    def test_keyed_fills_key_and_time_once(self):
        keyed = IngestEvent("x").keyed(NOW)
        assert keyed.idempotency_key
        assert keyed.timestamp == NOW
        assert keyed.keyed(datetime(2030, 1, 1, tzinfo=UTC)) == keyed
        assert IngestEvent("x").keyed(NOW).idempotency_key != keyed.idempotency_key

    def test_the_item_is_in_the_event_scope(self):
        item = IngestEvent("x", kind="turn", tier="global", user="ann", idempotency_key="k").item()
        assert (item.tier, item.namespace, item.kind) == (Tier.GLOBAL, "global:ann", "turn")
