"""Parsing of the filter language into typed conditions."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agent_engine import ContextItem, FilterError, Status, Tier, parse_filter
from agent_engine.filters import Condition, Filter, Op, parse_order


class TestParse:
    def test_none_and_empty_match_everything(self):
        """No filter and an empty document both parse to the empty conjunction."""
        assert parse_filter(None) == Filter() == parse_filter({})
        assert Filter().matches(ContextItem(id="a", kind="k"))

    def test_normalizes_values(self):
        """Enum strings become members, lists become tuples, shorthand becomes operators."""
        parsed = parse_filter({"tier": "task", "tags": ["a", "b", "a"], "kind": {"$in": ["x"]}})
        assert parsed.conditions == (
            Condition("tier", Op.EQ, Tier.TASK),
            Condition("tags", Op.IN, ("a", "b")),
            Condition("kind", Op.IN, ("x",)),
        )

    def test_parsed_filter_passes_through(self):
        """A Filter given where a document is expected is used as is."""
        parsed = parse_filter({"kind": "a"})
        assert parse_filter(parsed) is parsed

    def test_and_combines(self):
        """and_ keeps both sides' conditions, which is how stores pin a scope."""
        scoped = parse_filter({"namespace": "project:a"}).and_(
            parse_filter({"namespace": "project:b"})
        )
        assert scoped.fields() == {"namespace"}
        assert not scoped.matches(ContextItem(id="x", kind="k", namespace="project:b"))

    def test_error_names_field_and_value(self):
        """FilterError carries the offending field and value for callers to report."""
        with pytest.raises(FilterError) as info:
            parse_filter({"importance": "high"})
        assert info.value.field == "importance"
        assert info.value.value == "high"

    def test_unknown_field_lists_known_ones(self):
        """The message for a typo lists the fields that exist."""
        with pytest.raises(FilterError, match=r"known: .*importance"):
            parse_filter({"importanse": 1})

    def test_datetimes_compare_across_zones(self):
        """An aware bound in any zone compares by instant."""
        item = ContextItem(id="a", kind="k", timestamp=datetime(2024, 1, 1, 12, tzinfo=UTC))
        assert parse_filter({"timestamp": {"$gte": datetime(2024, 1, 1, 12, tzinfo=UTC)}}).matches(
            item
        )

    def test_status_member(self):
        """Enum members and their strings are interchangeable."""
        assert parse_filter({"status": Status.PINNED}) == parse_filter({"status": "pinned"})


class TestOrder:
    @pytest.mark.parametrize(
        ("spec", "field", "descending"),
        [
            ("timestamp", "timestamp", True),
            ("-importance", "importance", False),
            ("id", "id", True),
        ],
    )
    def test_seed_semantics(self, spec, field, descending):
        """A bare field sorts descending; a leading minus sorts ascending."""
        order = parse_order(spec)
        assert (order.field, order.descending) == (field, descending)
