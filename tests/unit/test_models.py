"""Construction-time validation of the data model."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import attrs
import numpy as np
import pytest

from agent_engine import (
    ContextItem,
    ContextRequest,
    Provenance,
    Status,
    Task,
    TaskState,
    Tier,
    TierShares,
    ValidationError,
)
from agent_engine._validate import MAX_JSON_DEPTH
from agent_engine.models import MAX_ID_LENGTH, MAX_ITEM_ID_LENGTH, AuditEvent, fingerprint_text

NOW = datetime(2024, 5, 1, 12, tzinfo=UTC)
EDGE_MAX = datetime.max.replace(tzinfo=timezone(-timedelta(hours=5)))
EDGE_MIN = datetime.min.replace(tzinfo=timezone(timedelta(hours=5)))


def _nested(depth):
    value = 1
    for _ in range(depth):
        value = {"a": value}
    return value


def _cycle():
    loop = {}
    loop["self"] = loop
    return loop


class TestContextItem:
    def test_defaults(self):
        """A minimal item gets sensible defaults and an aware UTC timestamp."""
        item = ContextItem(id="a", kind="note")
        assert item.tier is Tier.PROJECT
        assert item.status is Status.CONFIRMED
        assert item.tags == ()
        assert item.payload == {}
        assert item.timestamp.tzinfo is UTC

    def test_create_generates_unique_ids(self):
        """ContextItem.create mints a fresh id each time."""
        assert ContextItem.create("note", "x").id != ContextItem.create("note", "x").id

    @pytest.mark.parametrize(
        ("field", "value"),
        [
            pytest.param("importance", 1.5, id="importance-above-1"),
            pytest.param("importance", -0.1, id="importance-below-0"),
            pytest.param("importance", float("nan"), id="importance-nan"),
            pytest.param("importance", True, id="importance-bool"),
            pytest.param("importance", "0.5", id="importance-string"),
            pytest.param("token_cost", -1, id="negative-token-cost"),
            pytest.param("token_cost", 2.5, id="fractional-token-cost"),
            pytest.param("access_count", -3, id="negative-access-count"),
            pytest.param("timestamp", datetime(2024, 1, 1), id="naive-timestamp"),  # noqa: DTZ001
            pytest.param("timestamp", "2024-01-01T00:00:00Z", id="string-timestamp"),
            pytest.param("expires_at", datetime(2024, 1, 1), id="naive-expiry"),  # noqa: DTZ001
            pytest.param("id", "", id="empty-id"),
            pytest.param("id", "   ", id="blank-id"),
            pytest.param("id", " padded", id="padded-id"),
            pytest.param("id", "x" * (MAX_ITEM_ID_LENGTH + 1), id="long-id"),
            pytest.param("namespace", "x" * (MAX_ID_LENGTH + 1), id="long-namespace"),
            pytest.param("id", 7, id="int-id"),
            pytest.param("kind", "", id="empty-kind"),
            pytest.param("namespace", "", id="empty-namespace"),
            pytest.param("text", "a\x00b", id="nul-in-text"),
            pytest.param("tier", "planet", id="unknown-tier"),
            pytest.param("status", "maybe", id="unknown-status"),
            pytest.param("tags", "single-string", id="tags-as-string"),
            pytest.param("tags", ["ok", ""], id="empty-tag"),
            pytest.param("tags", [1], id="non-string-tag"),
            pytest.param(
                "payload", {"when": datetime(2024, 1, 1, tzinfo=UTC)}, id="payload-datetime"
            ),
            pytest.param("payload", {"x": float("nan")}, id="payload-nan"),
            pytest.param("payload", {"s": {1, 2}}, id="payload-set"),
            pytest.param("payload", ["not", "a", "mapping"], id="payload-list"),
            pytest.param("embedding", [1.0, float("inf")], id="embedding-inf"),
            pytest.param("embedding", [[1.0, 2.0]], id="embedding-2d"),
            pytest.param("embedding", [], id="embedding-empty"),
            pytest.param("embedding", ["a", "b"], id="embedding-strings"),
            pytest.param("text", "a\ud800b", id="lone-surrogate-in-text"),
            pytest.param("kind", "\udc00", id="lone-surrogate-in-kind"),
            pytest.param("id", "a\x00b", id="nul-in-id"),
            pytest.param("source", "x" * 256, id="long-source"),
            pytest.param("session", "\udfff", id="lone-surrogate-in-session"),
            pytest.param("tags", ["\x00"], id="nul-in-tag"),
            pytest.param("tags", ["x" * 256], id="long-tag"),
            pytest.param("tags", ["\ud800"], id="lone-surrogate-in-tag"),
            pytest.param("payload", {"\ud800": 1}, id="lone-surrogate-in-payload-key"),
            pytest.param("payload", {"k": ["\udfff"]}, id="lone-surrogate-in-payload-value"),
            pytest.param("payload", _nested(MAX_JSON_DEPTH + 1), id="payload-too-deep"),
            pytest.param("payload", _nested(5000), id="payload-far-too-deep"),
            pytest.param("payload", _cycle(), id="payload-cycle"),
            pytest.param("token_cost", 2**31, id="token-cost-past-int32"),
            pytest.param("access_count", 2**63, id="access-count-past-int64"),
            pytest.param("importance", 10**400, id="importance-past-float"),
            pytest.param("timestamp", EDGE_MAX, id="timestamp-past-utc-range"),
            pytest.param("expires_at", EDGE_MIN, id="expiry-before-utc-range"),
            pytest.param("embedding", [1e39, 1.0], id="embedding-past-float32"),
            pytest.param("embedding", [10**400], id="embedding-past-float"),
            pytest.param("embedding", [3e38, 3e38], id="embedding-norm-past-float32"),
            pytest.param("provenance", "from a task", id="provenance-string"),
        ],
    )
    def test_invalid_values_name_the_field(self, field, value):
        """Every invalid value raises ValidationError carrying the field name and value."""
        fields = {"id": "a", "kind": "note", field: value}
        with pytest.raises(ValidationError) as info:
            ContextItem(**fields)
        assert info.value.field == field
        assert field in str(info.value) or field == "tags"

    def test_payload_may_nest_to_the_limit(self):
        """A payload exactly MAX_JSON_DEPTH containers deep is accepted and copied."""
        payload = _nested(MAX_JSON_DEPTH)
        assert ContextItem(id="a", kind="k", payload=payload).payload == payload

    def test_edge_values_are_accepted(self):
        """The largest storable counts, valid astral text and the UTC edges are values too."""
        item = ContextItem(
            id="é" * 255,
            kind="\U0001f600",
            text="\U0001f600 \u202e",
            source="s" * 255,
            token_cost=2**31 - 1,
            access_count=2**31 - 1,
            timestamp=datetime.max.replace(tzinfo=UTC),
            payload={"big": 10**30, "nul": "\x00"},
        )
        assert item.access_count == 2**31 - 1

    def test_timestamps_are_normalized_to_utc(self):
        """An aware datetime in another zone is stored as the same instant in UTC."""
        zone = timezone(timedelta(hours=-7))
        item = ContextItem(id="a", kind="k", timestamp=datetime(2024, 1, 1, 5, tzinfo=zone))
        assert item.timestamp == datetime(2024, 1, 1, 12, tzinfo=UTC)
        assert item.timestamp.tzinfo is UTC

    def test_payload_is_copied(self):
        """Mutating the caller's dict after construction does not change the item."""
        payload = {"list": [1, 2]}
        item = ContextItem(id="a", kind="k", payload=payload)
        payload["list"].append(3)
        assert item.payload == {"list": [1, 2]}

    def test_tags_deduplicate_in_order(self):
        """Tags are a set; duplicates go and first-seen order stays."""
        assert ContextItem(id="a", kind="k", tags=["b", "a", "b"]).tags == ("b", "a")

    def test_embedding_is_read_only_float32(self):
        """Embeddings become read-only float32 vectors."""
        item = ContextItem(id="a", kind="k", embedding=[1, 2, 3])
        assert item.embedding is not None
        assert item.embedding.dtype == np.float32
        with pytest.raises(ValueError, match="read-only"):
            item.embedding[0] = 5

    def test_fingerprint_ignores_case_and_whitespace(self):
        """Texts that differ only in case and spacing share a fingerprint."""
        a = ContextItem(id="a", kind="k", text="Use  SQLite\nby default")
        b = ContextItem(id="b", kind="k", text="use sqlite by DEFAULT ")
        c = ContextItem(id="c", kind="k", text="use postgres by default")
        assert a.fingerprint == b.fingerprint == fingerprint_text("use sqlite by default")
        assert a.fingerprint != c.fingerprint

    def test_fingerprint_without_text_uses_payload(self):
        """Payload-only items are told apart by their payload, not all equal to ''."""
        a = ContextItem(id="a", kind="k", payload={"x": 1})
        b = ContextItem(id="b", kind="k", payload={"x": 2})
        assert a.fingerprint != b.fingerprint

    def test_fingerprint_follows_evolve(self):
        """Changing the text through evolve recomputes the fingerprint."""
        a = ContextItem(id="a", kind="k", text="one")
        assert attrs.evolve(a, text="two").fingerprint == fingerprint_text("two")

    def test_frozen(self):
        """Items cannot be changed in place."""
        item = ContextItem(id="a", kind="k")
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            item.text = "changed"  # type: ignore[misc]

    def test_expired(self):
        """An item is expired at and after its expiry instant, never without one."""
        item = ContextItem(id="a", kind="k", expires_at=NOW)
        assert item.expired(NOW)
        assert not item.expired(NOW - timedelta(seconds=1))
        assert not ContextItem(id="b", kind="k").expired(NOW)

    def test_provenance_must_be_provenance(self):
        """provenance takes a Provenance value only; anything else names the field."""
        with pytest.raises(ValidationError) as info:
            ContextItem(id="a", kind="k", provenance={"source_item_id": "x"})  # type: ignore[arg-type]
        assert info.value.field == "provenance"
        prov = Provenance("src", "task", "task:1", NOW, "worth keeping")
        assert ContextItem(id="a", kind="k", provenance=prov).provenance == prov


class TestTask:
    def test_terminal_states(self):
        """Succeeded, failed and cancelled are terminal; pending and running are not."""
        assert {s for s in TaskState if s.terminal} == {
            TaskState.SUCCEEDED,
            TaskState.FAILED,
            TaskState.CANCELLED,
        }

    def test_validation(self):
        """A task needs an id and a known state."""
        with pytest.raises(ValidationError):
            Task(id="")
        with pytest.raises(ValidationError):
            Task(id="t", state="exploded")


class TestTaskMetadata:
    def test_metadata_errors_name_metadata(self):
        """Task.metadata is refused under its own name, not the items' ``payload``."""
        with pytest.raises(ValidationError) as info:
            Task(id="t", metadata=_nested(MAX_JSON_DEPTH + 1))
        assert info.value.field == "metadata"

    def test_audit_detail_errors_name_detail(self):
        """AuditEvent.detail is refused under its own name."""
        with pytest.raises(ValidationError) as info:
            AuditEvent(action="add", tier="task", namespace="n", detail={"x": float("nan")})
        assert info.value.field == "detail"

    def test_audit_item_ids_must_be_a_list(self):
        """AuditEvent.item_ids of None is a ValidationError, not a TypeError."""
        with pytest.raises(ValidationError) as info:
            AuditEvent(action="add", tier="task", namespace="n", item_ids=None)
        assert info.value.field == "item_ids"


class TestContextRequest:
    @pytest.mark.parametrize(
        ("field", "value"),
        [
            pytest.param("shares", "40/40/20", id="shares-string"),
            pytest.param("shares", {"task": 1.0}, id="shares-dict"),
            pytest.param("profile", 5, id="profile-int"),
            pytest.param("profile", "a\ud800", id="profile-lone-surrogate"),
            pytest.param("query", "\udfff", id="query-lone-surrogate"),
            pytest.param("budget_tokens", 2**63, id="budget-past-int64"),
        ],
    )
    def test_wrong_values_name_the_field(self, field, value):
        """Wrong types and unstorable values are ValidationErrors naming the field."""
        with pytest.raises(ValidationError) as info:
            ContextRequest(**{"budget_tokens": 100, field: value})
        assert info.value.field == field

    def test_share_past_float_range(self):
        """A share too large for a float is refused, not an OverflowError."""
        with pytest.raises(ValidationError) as info:
            TierShares(task=10**400)
        assert info.value.field == "task"

    @pytest.mark.parametrize("budget", [0, -5, 1.5, True, "100"])
    def test_budget_must_be_positive_int(self, budget):
        """A budget is a positive number of tokens."""
        with pytest.raises(ValidationError) as info:
            ContextRequest(budget_tokens=budget)
        assert info.value.field == "budget_tokens"

    def test_shares_sum_to_one(self):
        """Shares that do not sum to 1 are refused; the default split is 40/40/20."""
        with pytest.raises(ValidationError):
            TierShares(0.5, 0.5, 0.5)
        with pytest.raises(ValidationError):
            TierShares(-0.2, 1.0, 0.2)
        shares = TierShares()
        assert (shares.of(Tier.TASK), shares.of(Tier.PROJECT), shares.of(Tier.GLOBAL)) == (
            0.4,
            0.4,
            0.2,
        )
