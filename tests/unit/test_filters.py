"""Parsing of the filter language into typed conditions."""

from __future__ import annotations

import warnings
from datetime import UTC, datetime, timedelta, timezone

import pytest

from agent_engine import (
    ContextItem,
    FilterError,
    FilterTooLargeError,
    InMemoryBackend,
    Status,
    Tier,
    parse_filter,
)
from agent_engine.filters import (
    MAX_CONDITIONS,
    MAX_LIST_VALUES,
    MAX_VALUES,
    ORDER_FLIP_RELEASE,
    Condition,
    Filter,
    Op,
    Order,
    parse_order,
)
from agent_engine.tiers.project import ProjectMemoryStore


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

    @pytest.mark.parametrize(
        ("document", "field"),
        [
            pytest.param({"kind": "a\ud800"}, "kind", id="lone-surrogate"),
            pytest.param({"source": {"$in": ["ok", "\x00"]}}, "source", id="nul-in-list"),
            pytest.param({"tags": "\udfff"}, "tags", id="lone-surrogate-tag"),
            pytest.param({"importance": {"$gt": 10**400}}, "importance", id="past-float"),
            pytest.param({"timestamp": {"$gte": 2**63}}, "timestamp", id="int-for-datetime"),
            pytest.param({"importance": 2**63}, "importance", id="past-bigint"),
            pytest.param({"access_count": {"$lt": 2**31}}, "access_count", id="past-int32"),
            pytest.param({"token_cost": {"$gte": -(2**31) - 1}}, "token_cost", id="below-int32"),
            pytest.param(
                {"expires_at": {"$lt": datetime.max.replace(tzinfo=timezone(-timedelta(hours=1)))}},
                "expires_at",
                id="datetime-past-utc",
            ),
        ],
    )
    def test_unstorable_values_name_the_field(self, document, field):
        """Values no backend can bind are FilterErrors naming the field, on every backend."""
        with pytest.raises(FilterError) as info:
            parse_filter(document)
        assert info.value.field == field

    def test_edge_numbers_are_accepted(self):
        """The bounds of each column's integer range and infinities are valid bounds."""
        parse_filter({"importance": {"$lt": float("inf")}, "access_count": {"$lte": 2**31 - 1}})
        parse_filter({"importance": {"$gt": -(2**63)}})

    def test_lists_may_hold_any_integer(self):
        """A listed integer past every column is no error: it equals no stored number."""
        parsed = parse_filter({"access_count": {"$in": [2**70, 2]}})
        assert parsed.matches(ContextItem(id="a", kind="k", access_count=2))
        assert not parsed.matches(ContextItem(id="b", kind="k", access_count=3))

    def test_datetimes_are_normalized_to_utc(self):
        """A datetime bound is kept as the same instant in UTC."""
        bound = datetime(2024, 1, 1, 7, tzinfo=timezone(timedelta(hours=7)))
        (condition,) = parse_filter({"timestamp": {"$gt": bound}}).conditions
        assert condition.value == bound
        assert condition.value.tzinfo is UTC

    def test_unknown_order_names_order_by(self):
        """An unknown order_by field is reported as the order_by argument."""
        with pytest.raises(FilterError) as info:
            parse_order("-\ud800")
        assert info.value.field == "order_by"

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


class TestLimits:
    def test_a_list_at_the_limit_is_accepted(self):
        """A list of exactly MAX_LIST_VALUES values parses."""
        tags = [f"t{n}" for n in range(MAX_LIST_VALUES)]
        assert parse_filter({"tags": {"$all": tags}}).conditions[0].value == tuple(tags)

    @pytest.mark.parametrize(
        ("field", "op"), [("tags", "$all"), ("tags", "$in"), ("kind", "$nin"), ("id", "$in")]
    )
    def test_a_longer_list_names_its_field_and_the_limit(self, field, op):
        """One value more is a FilterTooLargeError (a FilterError, a ValueError) naming both."""
        values = [f"v{n}" for n in range(MAX_LIST_VALUES + 1)]
        with pytest.raises(FilterTooLargeError, match=rf"'{field}'.*at most 1000") as info:
            parse_filter({field: {op: values}})
        assert isinstance(info.value, FilterError)
        assert isinstance(info.value, ValueError)
        assert (info.value.field, info.value.limit, info.value.size) == (field, 1000, 1001)

    def test_a_long_list_is_refused_before_its_values_are_read(self):
        """A huge list of junk is refused for its length, without validating a million values."""
        with pytest.raises(FilterTooLargeError):
            parse_filter({"importance": {"$in": [object()] * 1_000_000}})

    def test_values_across_the_filter_are_bounded(self):
        """Lists within the limit one by one still may not carry more than MAX_VALUES together."""
        fields = ("id", "kind", "source", "session", "namespace", "fingerprint")
        document = {field: {"$in": [f"v{n}" for n in range(MAX_LIST_VALUES)]} for field in fields}
        with pytest.raises(FilterTooLargeError, match="at most 5000") as info:
            parse_filter(document)
        assert (info.value.field, info.value.limit, info.value.size) == (None, MAX_VALUES, 6000)

    def test_conditions_joined_with_and_are_bounded(self):
        """Filter.and_ cannot grow a filter past MAX_CONDITIONS conditions."""
        joined = Filter()
        for n in range(MAX_CONDITIONS):
            joined = joined.and_(parse_filter({"tags": f"t{n}"}))
        with pytest.raises(FilterTooLargeError, match="at most 64") as info:
            joined.and_(parse_filter({"kind": "note"}))
        assert (info.value.field, info.value.size) == (None, MAX_CONDITIONS + 1)

    def test_a_filter_built_directly_is_checked_too(self):
        """Conditions built by hand meet the same limits as parsed ones."""
        with pytest.raises(FilterTooLargeError):
            Filter((Condition("tags", Op.ALL, tuple(f"t{n}" for n in range(2000))),))


class TestOrder:
    @pytest.mark.parametrize("field", ["timestamp", "importance", "id"])
    def test_bare_field_keeps_its_meaning_and_warns(self, field):
        """A bare field still sorts descending, with a warning that names the release from
        which it sorts ascending."""
        with pytest.warns(DeprecationWarning, match=rf"{ORDER_FLIP_RELEASE}.*sort ascending"):
            order = parse_order(field)
        assert (order.field, order.descending) == (field, True)

    @pytest.mark.parametrize(
        ("spec", "descending"), [("-importance", True), ("+importance", False)]
    )
    def test_signed_field_follows_the_usual_convention_silently(self, spec, descending):
        """``"-field"`` sorts descending and ``"+field"`` ascending, as in SQL and ORMs."""
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert parse_order(spec) == Order("importance", descending=descending)

    def test_warning_says_what_to_write(self):
        """The warning names both explicit spellings, so the fix can be copied from it."""
        with pytest.warns(DeprecationWarning, match="0.2.0") as record:
            parse_order("importance")
        message = str(record[0].message)
        assert "'-importance'" in message
        assert "'+importance'" in message

    def test_order_passes_through(self):
        """An Order given as order_by is used as is, without a warning."""
        order = Order.desc("timestamp")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert parse_order(order) is order

    def test_named_constructors(self):
        """asc and desc say the direction in their name."""
        assert Order.asc("id") == Order("id", descending=False)
        assert Order.desc("id") == Order("id", descending=True)

    @pytest.mark.parametrize(
        ("field", "descending"),
        [("tags", True), ("payload", False), ("", True), (None, True), ("id", 1)],
    )
    def test_order_refuses_what_it_cannot_sort_by(self, field, descending):
        """An Order is valid however it is built: an unorderable field or a non-bool direction
        is a FilterError naming order_by."""
        with pytest.raises(FilterError) as info:
            Order(field, descending)
        assert info.value.field == "order_by"

    @pytest.mark.parametrize("spec", ["-", "+", "--id", "-tags", "+-id", "-\ud800"])
    def test_malformed_raises_before_warning(self, spec):
        """A malformed legacy-looking spelling is refused, never first warned about."""
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(FilterError) as info:
                parse_order(spec)
        assert (info.value.field, info.value.value) == ("order_by", spec)

    def test_warning_points_at_the_callers_line(self):
        """The warning names the caller's file, not a line inside agent_engine, through a backend
        and through a tier store alike."""
        backend = InMemoryBackend()
        store = ProjectMemoryStore("web", backend)
        with pytest.warns(DeprecationWarning, match="order_by='timestamp'") as by_backend:
            backend.query(order_by="timestamp")
        with pytest.warns(DeprecationWarning, match="order_by='importance'") as by_store:
            store.query(order_by="importance")
        assert [w.filename for w in [*by_backend, *by_store]] == [__file__, __file__]
