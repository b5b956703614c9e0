"""Round trips through the one cattrs converter."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_engine import (
    ContextItem,
    ContextRequest,
    Provenance,
    Status,
    Task,
    Tier,
    TierShares,
    ValidationError,
    from_dict,
    to_dict,
)
from agent_engine.serde import decode_vector, encode_vector

T0 = datetime(2024, 1, 1, tzinfo=UTC)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)

items = st.builds(
    ContextItem,
    id=st.text(min_size=1, max_size=10).map(lambda s: "i" + s.strip().replace("\x00", "") or "i"),
    kind=st.sampled_from(["note", "decision"]),
    text=st.text(max_size=30).map(lambda s: s.replace("\x00", "")),
    tier=st.sampled_from(list(Tier)),
    timestamp=st.integers(0, 10**6).map(lambda s: T0 + timedelta(seconds=s, microseconds=s % 999)),
    tags=st.lists(
        st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=5),
        max_size=3,
    ),
    importance=st.floats(0, 1),
    token_cost=st.none() | st.integers(0, 10**6),
    payload=st.dictionaries(st.text(max_size=5), json_values, max_size=4),
    embedding=st.none() | st.lists(st.floats(-1e6, 1e6, width=32), min_size=1, max_size=8),
    status=st.sampled_from(list(Status)),
    expires_at=st.none() | st.just(T0),
    provenance=st.none() | st.just(Provenance("s", Tier.TASK, "task:1", T0, "r")),
)


class TestRoundTrip:
    @given(items)
    def test_items_round_trip_through_json(self, item):
        """to_dict -> JSON text -> from_dict gives back an equal item, embedding included."""
        data = json.loads(json.dumps(to_dict(item)))
        back = from_dict(ContextItem, data)
        assert back == item
        assert back.fingerprint == item.fingerprint
        if item.embedding is None:
            assert back.embedding is None
        else:
            assert np.array_equal(back.embedding, item.embedding)

    @pytest.mark.parametrize(
        "value",
        [
            Task(id="t", project_id="p", metadata={"a": [1]}),
            ContextRequest(budget_tokens=512, query="q", shares=TierShares(0.5, 0.3, 0.2)),
            ContextRequest(budget_tokens=512, shares=TierShares(0.3, 0.3, 0.2, session=0.2)),
            ContextRequest(budget_tokens=1),
            Provenance("s", Tier.PROJECT, "project:x", T0, "why"),
        ],
    )
    def test_other_models_round_trip(self, value):
        """Every model survives a JSON round trip."""
        assert from_dict(type(value), json.loads(json.dumps(to_dict(value)))) == value

    def test_wire_format(self):
        """Datetimes are ISO strings, enums their values, the global share is called 'global'."""
        data = to_dict(ContextRequest(budget_tokens=10, shares=TierShares()))
        assert data["shares"] == {"task": 0.4, "project": 0.4, "global": 0.2}
        item = to_dict(ContextItem(id="a", kind="k", timestamp=T0, embedding=[1.0, 2.0]))
        assert item["timestamp"] == "2024-01-01T00:00:00+00:00"
        assert item["tier"] == "project"
        assert isinstance(item["embedding"], str)
        assert "fingerprint" not in item


class TestBadInput:
    @pytest.mark.parametrize(
        "data",
        [
            pytest.param({"kind": "k"}, id="missing-id"),
            pytest.param({"id": "a", "kind": "k", "timestamp": "yesterday"}, id="bad-datetime"),
            pytest.param({"id": "a", "kind": "k", "timestamp": "2024-01-01T00:00:00"}, id="naive"),
            pytest.param({"id": "a", "kind": "k", "importance": 7}, id="bad-importance"),
            pytest.param({"id": "a", "kind": "k", "embedding": "%%%"}, id="bad-base64"),
            pytest.param({"id": "a", "kind": "k", "embedding": "AAA="}, id="partial-float"),
            pytest.param(["not", "a", "dict"], id="not-a-dict"),
        ],
    )
    def test_errors_are_validation_errors(self, data):
        """Malformed input raises ValidationError, never a bare KeyError or TypeError."""
        with pytest.raises(ValidationError):
            from_dict(ContextItem, data)

    def test_vector_codec_is_exact(self):
        """The base64 vector codec is lossless for float32."""
        vector = np.array([0.1, -3.5e-8, 1e30], dtype=np.float32)
        assert np.array_equal(decode_vector(encode_vector(vector)), vector)
