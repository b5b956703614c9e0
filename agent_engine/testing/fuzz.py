"""Adversarial input against every public entry point: accepted, or refused cleanly.

:class:`BackendFuzz` is a conformance-style suite. Subclass it and override ``backend`` so it
yields an empty backend built with the suite's ``embedder`` fixture::

    class TestMyBackendFuzz(BackendFuzz):
        @pytest.fixture
        def backend(self, embedder):
            with MyBackend(..., embedder=embedder) as backend:
                yield backend

Each test feeds values made by Hypothesis (lone surrogates, NUL, integers past 64 bits,
infinities and NaN, ``None`` and wrong types, payloads nested past the limit, datetimes at the
edge of the range with an offset, long lists) to one group of entry points, with every other
argument valid, and checks the contract of ``docs/backends.md``:

* the call succeeds, or raises an :class:`~agent_engine.errors.AgentEngineError` of a kind that
  input can cause; a builtin exception escaping, or a
  :class:`~agent_engine.errors.BackendError` from a healthy store (input that got past
  validation and was refused by the database), fails the test;
* a :class:`~agent_engine.errors.ValidationError` names the argument or field that was wrong;
* after a refusal every item in the backend is exactly what it was;
* an item that was accepted reads back equal.

The examples are derandomized: every run, on every backend, tries the same inputs, so the
suite is a stable regression test rather than a search that fails on some days.

The strategies are public too (``bad_texts``, ``extreme_ints``, ``item_field_cases``, ...) so
that other suites can draw the same adversarial values.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, Final

import attrs
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from agent_engine._validate import MAX_COUNT, MAX_INT, MAX_JSON_DEPTH, MIN_INT
from agent_engine.assembler.assembler import AssemblerConfig, ContextAssembler
from agent_engine.assembler.policies import DEFAULT_POLICIES
from agent_engine.embeddings import Embedder, HashingEmbedder
from agent_engine.errors import (
    AgentEngineError,
    ConfirmationDeclined,
    DuplicateItemError,
    ItemNotFoundError,
    ValidationError,
)
from agent_engine.filters import FIELDS, FieldKind, Op, Order
from agent_engine.memory.backend import DEFAULT_ORDER, MemoryBackend
from agent_engine.models import (
    ArchiveReason,
    ContextItem,
    ContextRequest,
    Provenance,
    Status,
    Task,
    Tier,
    TierShares,
)
from agent_engine.serde import to_dict
from agent_engine.tiers.global_ import GlobalMemoryStore
from agent_engine.tiers.project import ProjectMemoryStore
from agent_engine.tiers.promotion import promote
from agent_engine.tiers.scope import project_namespace, task_namespace
from agent_engine.tiers.stores import MemoryStores
from agent_engine.tiers.task import TaskMemoryStore

__all__ = [
    "BackendFuzz",
    "DEEP_ENV",
    "EDGE_MAX",
    "EMBED_DIM",
    "MODEL_BASES",
    "adversarial",
    "bad_texts",
    "deep_values",
    "error_fields",
    "extreme_datetimes",
    "extreme_floats",
    "extreme_ints",
    "fuzz_settings",
    "item_field_cases",
    "labels",
    "model_field_cases",
    "nested",
    "seed_ids",
    "seed_items",
    "wrong_types",
]

EMBED_DIM: Final = 16

DEEP_ENV: Final = "AGENT_ENGINE_FUZZ_EXAMPLES"
"""Set to a number of examples (``2000``) to search with fresh random inputs on each run."""
_DEEP = int(os.environ.get(DEEP_ENV, "0") or 0)

fuzz_settings = settings(
    max_examples=_DEEP or 60,
    deadline=None,
    derandomize=not _DEEP,
    database=None,
    # Each case varies one argument, so a failing example is already small; shrinking one
    # through a database round trip per step would take minutes.
    phases=[Phase.explicit, Phase.generate],
    # Every backend's subclass runs the same test functions on one backend per test.
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
        HealthCheck.differing_executors,
    ],
)
"""The suite's settings: 60 fixed examples per test, no deadline (databases vary).

With :data:`DEEP_ENV` set, as many random examples as it says: a deeper search to run by hand
before a release, while CI keeps the same inputs every run.
"""

# ----------------------------------------------------------------------------- values

_UTF8 = st.characters(codec="utf-8", exclude_characters="\x00")
_UTF8_WITH_NUL = st.characters(codec="utf-8")
_POISON = ("\ud800", "\udbff", "\udc00", "\udfff", "\x00")


def _texts(min_size: int = 0, max_size: int = 30) -> st.SearchStrategy[str]:
    return st.text(_UTF8, min_size=min_size, max_size=max_size)


labels: st.SearchStrategy[str] = st.one_of(
    _texts(), st.sampled_from(["é" * 255, "\U0001f600" * 255, "x" * 255])
)
"""Storable text for sources, sessions and tags: any valid Unicode up to 255 characters."""

keys: st.SearchStrategy[str] = st.one_of(
    _texts(1, 30).map(str.strip).filter(bool), st.sampled_from(["é" * 255, "a b"])
)
"""Storable identifiers: non-blank, no surrounding whitespace, at most 255 characters."""

bad_texts: st.SearchStrategy[str] = st.one_of(
    st.tuples(_texts(max_size=6), st.sampled_from(_POISON), _texts(max_size=6)).map("".join),
    st.integers(256, 400).map(lambda n: "x" * n),
    st.sampled_from(["", " ", " padded", "padded\n"]),
)
"""Text no store can hold or no key may be: lone surrogates, NUL, too long, blank, padded."""


class _Opaque:
    def __repr__(self) -> str:
        return "<opaque>"


wrong_types: st.SearchStrategy[Any] = st.sampled_from(
    [None, True, False, b"bytes", bytearray(b"x"), (), [], {}, set(), 1j, _Opaque(), ..., "text"]
)
"""Values of the wrong type for almost any argument (``None`` included)."""

EXTREME_INTS: Final = (
    -1,
    0,
    MAX_COUNT,
    MAX_COUNT + 1,
    2**53 + 1,
    MAX_INT,
    MAX_INT + 1,
    MIN_INT,
    MIN_INT - 1,
    2**64,
    10**30,
    10**400,
    -(10**400),
)
extreme_ints: st.SearchStrategy[int] = st.one_of(st.sampled_from(EXTREME_INTS), st.integers())
"""Integers at and past the 32- and 64-bit edges, and past a float's range."""

extreme_floats: st.SearchStrategy[float] = st.one_of(
    st.floats(), st.sampled_from([1e308, -1e308, 5e-324, -0.0, 3.5e38, float("inf")])
)
"""Floats including NaN, infinities, subnormals and values past float32."""


class _NestedDict(dict[str, Any]):
    """The outermost level of :func:`nested`: a short repr, so reports do not recurse."""

    depth = 0

    def __repr__(self) -> str:
        return f"nested({self.depth})"


class _NestedList(list[Any]):
    depth = 0

    def __repr__(self) -> str:
        return f"nested({self.depth}, kind=list)"


def nested(depth: int, *, kind: type[dict[str, Any] | list[Any]] = dict) -> Any:
    """A value ``depth`` containers deep (dicts or lists), built without recursion."""
    value: Any = 1
    for _ in range(depth - 1):
        value = {"a": value} if kind is dict else [value]
    outer: _NestedDict | _NestedList = (
        _NestedDict(a=value) if kind is dict else _NestedList([value])
    )
    outer.depth = depth
    return outer


def _cycle() -> dict[str, Any]:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    return loop


deep_values: st.SearchStrategy[Any] = st.one_of(
    st.sampled_from([MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1, 200, 5000]).map(
        nested
    ),
    st.sampled_from([MAX_JSON_DEPTH, 5000]).map(lambda n: {"list": nested(n - 1, kind=list)}),
    st.builds(_cycle),
)
"""Payloads nested around the depth limit and far past it, and a cyclic one."""

EDGE_MAX: Final = datetime.max.replace(tzinfo=timezone(-timedelta(hours=5)))
"""The last datetime, five hours behind UTC: its UTC instant is past ``datetime.max``."""

_offsets = st.timedeltas(
    min_value=-timedelta(hours=23, minutes=59), max_value=timedelta(hours=23, minutes=59)
).map(timezone)
_storable_datetimes = st.one_of(
    st.datetimes(timezones=st.just(UTC)),
    st.sampled_from([datetime.max.replace(tzinfo=UTC), datetime.min.replace(tzinfo=UTC)]),
)
extreme_datetimes: st.SearchStrategy[Any] = st.one_of(
    st.datetimes(timezones=_offsets),
    st.sampled_from(
        [
            EDGE_MAX,
            datetime.min.replace(tzinfo=timezone(timedelta(hours=5))),
            datetime.max.replace(tzinfo=timezone(-timedelta(hours=23, minutes=59))),
            datetime(2024, 1, 1),  # noqa: DTZ001 - naive on purpose
        ]
    ),
    st.datetimes(),
)
"""Aware datetimes across the whole range with any offset (some overflow UTC), and naive ones."""

_json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    extreme_ints,
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(_UTF8_WITH_NUL, max_size=20),
)
_payloads = st.one_of(
    st.dictionaries(
        st.text(_UTF8_WITH_NUL, max_size=10),
        st.recursive(
            _json_scalars,
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(st.text(_UTF8, max_size=5), inner, max_size=3)
            ),
            max_leaves=8,
        ),
        max_size=4,
    ),
    st.just(nested(MAX_JSON_DEPTH)),
)

adversarial: st.SearchStrategy[Any] = st.one_of(
    bad_texts, wrong_types, extreme_ints, extreme_floats, extreme_datetimes, deep_values
)
"""Any of the adversarial values above."""

_embeddings = st.one_of(
    st.none(),
    st.lists(st.floats(-1e3, 1e3, width=32), min_size=EMBED_DIM, max_size=EMBED_DIM),
    st.lists(
        st.floats(width=32, allow_nan=False, allow_infinity=False),
        min_size=EMBED_DIM,
        max_size=EMBED_DIM,
    ),
    st.just([0.0] * EMBED_DIM),
    st.lists(st.floats(width=32), min_size=1, max_size=EMBED_DIM + 1),
    st.sampled_from([[10**400] * EMBED_DIM, [[1.0, 2.0]], [], "vector", [1e39] * EMBED_DIM]),
)

_T0 = datetime(2024, 1, 1, tzinfo=UTC)
_provenances = st.builds(
    Provenance,
    source_item_id=keys,
    source_tier=st.sampled_from(Tier),
    source_namespace=keys,
    promoted_at=_storable_datetimes,
    reason=st.text(_UTF8, max_size=20),
)

_ITEM_FIELDS: Final[dict[str, st.SearchStrategy[Any]]] = {
    "id": st.one_of(keys, bad_texts, wrong_types, extreme_ints),
    "kind": st.one_of(keys, bad_texts, wrong_types),
    "text": st.one_of(_texts(max_size=200), bad_texts, wrong_types),
    "tier": st.one_of(st.sampled_from(Tier), st.sampled_from(["task", "planet"]), wrong_types),
    "namespace": st.one_of(keys, bad_texts, wrong_types),
    "source": st.one_of(labels, bad_texts, wrong_types),
    "session": st.one_of(labels, bad_texts, wrong_types),
    "timestamp": st.one_of(_storable_datetimes, extreme_datetimes, wrong_types),
    "tags": st.one_of(
        st.lists(labels.filter(bool), max_size=4),
        st.lists(st.one_of(bad_texts, wrong_types, extreme_ints), min_size=1, max_size=3),
        wrong_types,
    ),
    "importance": st.one_of(st.floats(0, 1), extreme_floats, extreme_ints, wrong_types),
    "token_cost": st.one_of(st.integers(0, MAX_COUNT), extreme_ints, extreme_floats, wrong_types),
    "payload": st.one_of(
        _payloads,
        deep_values,
        wrong_types,
        st.dictionaries(bad_texts, st.just(1), min_size=1, max_size=1),
        st.dictionaries(st.just("k"), st.one_of(bad_texts, extreme_floats), min_size=1, max_size=1),
        st.just({"when": _T0}),
    ),
    "embedding": _embeddings,
    "status": st.one_of(st.sampled_from(Status), bad_texts, wrong_types),
    "access_count": st.one_of(st.integers(0, MAX_COUNT), extreme_ints, wrong_types),
    "last_accessed_at": st.one_of(_storable_datetimes, extreme_datetimes, wrong_types),
    "expires_at": st.one_of(_storable_datetimes, extreme_datetimes, wrong_types),
    "provenance": st.one_of(st.none(), _provenances, wrong_types, st.just({"source_item_id": "x"})),
}


def item_field_cases() -> st.SearchStrategy[tuple[str, Any]]:
    """``(field, value)``: one field of ContextItem and a value for it, often an adversarial one."""
    return st.sampled_from(sorted(_ITEM_FIELDS)).flatmap(
        lambda name: st.tuples(st.just(name), _ITEM_FIELDS[name])
    )


_MODEL_FIELDS: Final[dict[type, dict[str, st.SearchStrategy[Any]]]] = {
    Task: {
        "id": _ITEM_FIELDS["id"],
        "project_id": st.one_of(keys, bad_texts, wrong_types),
        "user_id": st.one_of(keys, bad_texts, wrong_types),
        "description": st.one_of(_texts(), bad_texts, wrong_types),
        "state": st.one_of(st.sampled_from(["running", "failed", "exploded"]), wrong_types),
        "metadata": _ITEM_FIELDS["payload"],
    },
    ContextRequest: {
        "budget_tokens": st.one_of(st.integers(1, 4000), extreme_ints, extreme_floats, wrong_types),
        "query": st.one_of(_texts(), bad_texts, wrong_types),
        "shares": st.one_of(
            st.none(),
            st.sampled_from([TierShares(), TierShares(1.0, 0.0, 0.0)]),
            wrong_types,
            st.just({"task": 1.0}),
        ),
        "policy": st.one_of(st.sampled_from(sorted(DEFAULT_POLICIES)), bad_texts, wrong_types),
        "profile": st.one_of(st.none(), st.just("coding"), bad_texts, wrong_types),
    },
    TierShares: {
        "task": st.one_of(st.floats(0, 1), extreme_floats, extreme_ints, wrong_types),
        "project": st.one_of(st.floats(0, 1), extreme_floats, extreme_ints, wrong_types),
        "global_": st.one_of(st.floats(0, 1), extreme_floats, extreme_ints, wrong_types),
    },
    Provenance: {
        "source_item_id": st.one_of(keys, bad_texts, wrong_types),
        "source_tier": st.one_of(st.sampled_from(Tier), wrong_types),
        "source_namespace": st.one_of(keys, bad_texts, wrong_types),
        "promoted_at": st.one_of(_storable_datetimes, extreme_datetimes, wrong_types),
        "reason": st.one_of(_texts(), bad_texts, wrong_types),
    },
}

MODEL_BASES: Final[dict[type, dict[str, Any]]] = {
    Task: {"id": "task-1"},
    ContextRequest: {"budget_tokens": 500},
    TierShares: {"task": 0.4, "project": 0.4, "global_": 0.2},
    Provenance: {
        "source_item_id": "a",
        "source_tier": Tier.TASK,
        "source_namespace": "task:1",
        "promoted_at": _T0,
    },
}
"""Valid arguments for each model; a case replaces one of them."""


def model_field_cases(model: type) -> st.SearchStrategy[tuple[str, Any]]:
    """``(field, value)`` for one field of ``model`` (Task, ContextRequest, TierShares, ...)."""
    fields = _MODEL_FIELDS[model]
    return st.sampled_from(sorted(fields)).flatmap(
        lambda name: st.tuples(st.just(name), fields[name])
    )


_SHARE_FIELDS: Final = {"global_": "global"}
"""TierShares names ``global_`` in errors as the wire name ``global``."""


def error_fields(model: type, name: str) -> set[str | None]:
    """The field names a refusal of ``name`` may carry (TierShares sums name ``shares``)."""
    if model is TierShares:
        return {_SHARE_FIELDS.get(name, name), "shares"}
    return {name}


# ----------------------------------------------------------------------------- filters

_FILTER_KEYS = st.one_of(st.sampled_from(sorted(FIELDS)), bad_texts, keys)
_FILTER_VALUES = st.one_of(
    adversarial,
    keys,
    st.sampled_from([*Tier, *Status]),
    st.floats(0, 1),
    st.integers(-5, 5),
    _storable_datetimes,
    st.lists(st.one_of(keys, adversarial), max_size=3),
)
_OPS = st.one_of(st.sampled_from([op.value for op in Op]), st.sampled_from(["$regex", "eq", ""]))


_KIND_VALUES: Final[dict[FieldKind, st.SearchStrategy[Any]]] = {
    FieldKind.STRING: st.one_of(bad_texts, keys),
    FieldKind.ENUM: st.one_of(bad_texts, st.sampled_from([*Tier, *Status])),
    FieldKind.NUMBER: st.one_of(extreme_ints, extreme_floats),
    FieldKind.DATETIME: extreme_datetimes,
    FieldKind.TAGS: st.one_of(bad_texts, st.lists(bad_texts, min_size=1, max_size=2)),
}
"""Adversarial values of the type each field compares with (edges rather than type errors)."""


@st.composite
def _filter_cases(draw: st.DrawFn) -> tuple[Any, set[str | None]]:
    """A filter document with one adversarial part, and the fields a refusal may name."""
    shape = draw(st.sampled_from(["value", "operator", "list", "not-a-dict"]))
    if shape == "not-a-dict":
        return draw(st.one_of(wrong_types, extreme_ints, bad_texts)), {None}
    key = draw(_FILTER_KEYS)
    spec = FIELDS.get(key)
    values = _FILTER_VALUES if spec is None else st.one_of(_KIND_VALUES[spec.kind], _FILTER_VALUES)
    if shape == "value":
        return {key: draw(values)}, {key}
    if shape == "list":
        operator = draw(st.sampled_from(["$in", "$nin", "$all"]))
        return {key: {operator: draw(st.lists(values, min_size=1, max_size=3))}}, {key}
    return {key: {draw(_OPS): draw(values)}}, {key}


_LIMITS = st.one_of(st.integers(0, 50), st.none(), extreme_ints, extreme_floats, wrong_types)
_ORDERS = st.one_of(
    st.sampled_from(sorted(FIELDS)).map("+".__add__),
    st.builds(
        Order, st.sampled_from(sorted(n for n, f in FIELDS.items() if f.orderable)), st.booleans()
    ),
    st.sampled_from(["+", "-", "--id", "++id", "+-id", "-+id"]),
    bad_texts,
    wrong_types,
)
_KS = st.one_of(st.integers(1, 20), extreme_ints, extreme_floats, wrong_types)
_QUERIES = st.one_of(
    _texts(),
    bad_texts,
    wrong_types,
    _embeddings,
    st.lists(st.floats(-1, 1, width=32), min_size=EMBED_DIM, max_size=EMBED_DIM),
)

# ----------------------------------------------------------------------------- checking

_INPUT_ERRORS = (ValidationError, DuplicateItemError, ItemNotFoundError, ConfirmationDeclined)
"""What bad input may raise: anything else from a healthy store is a defect."""


class _Refused:
    """The outcome of a call that raised one of the input errors."""

    def __init__(self, error: AgentEngineError) -> None:
        self.error = error


def snapshot(backend: MemoryBackend) -> dict[str, dict[str, Any]]:
    """Every item of ``backend``, field for field (the vector included), by id."""
    return {item.id: to_dict(item) for item in backend.query(None, limit=None, order_by="+id")}


def attempt(
    backend: MemoryBackend, call: Callable[[], Any], fields: set[str | None]
) -> Any | _Refused:
    """Run ``call``; if it refuses, check the error and that ``backend`` did not change.

    Returns the call's result, or a :class:`_Refused` holding the error.
    """
    before = snapshot(backend)
    try:
        return call()
    except _INPUT_ERRORS as caught:
        refused = _Refused(caught)
    except AgentEngineError as error:
        pytest.fail(f"input reached the store and was refused there: {error!r}")
    except Exception as error:  # noqa: BLE001 - any builtin escaping is the failure reported
        pytest.fail(f"a builtin {type(error).__name__} escaped: {error!r}")
    problem = refused.error
    if isinstance(problem, ValidationError):
        assert problem.field in fields, (
            f"{type(problem).__name__}({problem}) names field {problem.field!r}; "
            f"expected one of {sorted(map(str, fields))}"
        )
    assert snapshot(backend) == before, f"the store changed although the call raised {problem!r}"
    return refused


def _named(field: str) -> set[str | None]:
    return {field}


def _same(got: ContextItem | None, expected: ContextItem) -> bool:
    if got is None or got != expected:
        return False
    if expected.embedding is None:
        return True
    return got.embedding is not None and bool(np.array_equal(got.embedding, expected.embedding))


# ----------------------------------------------------------------------------- the suite

_SEED_FIELDS: Final[tuple[dict[str, Any], ...]] = (
    {"text": "plain note about sqlite", "tags": ("a",)},
    {
        "text": "\U0001f600 astral and \u202e bidi \x7f text",
        "timestamp": datetime.max.replace(tzinfo=UTC),
        "importance": 1.0,
        "access_count": MAX_COUNT,
        "token_cost": MAX_COUNT,
        "tags": ("é" * 255, "b"),
        "source": "s" * 255,
        "session": "é" * 255,
    },
    {
        "text": "",
        "payload": {"deep": nested(MAX_JSON_DEPTH - 1), "big": 10**30, "nul\x00": "\x00"},
        "timestamp": datetime.min.replace(tzinfo=UTC),
        "importance": 0.0,
        "last_accessed_at": datetime.max.replace(tzinfo=UTC),
        "expires_at": datetime.min.replace(tzinfo=UTC),
    },
    {"text": "pinned decision", "status": Status.PINNED, "embedding": [0.5] * EMBED_DIM},
)


def seed_ids(namespace: str = "fuzz") -> list[str]:
    """The ids of the seed items of ``namespace`` (see :func:`seed_items`)."""
    return [f"seed-{namespace}-{n}" for n in range(len(_SEED_FIELDS))]


def seed_items(namespace: str = "fuzz", tier: Tier = Tier.PROJECT) -> list[ContextItem]:
    """Items at the edges of what is valid: every backend must store them and read them back."""
    return [
        ContextItem(
            id=item_id,
            kind="note",
            namespace=namespace,
            tier=tier,
            **{"timestamp": _T0 + timedelta(minutes=n), **fields},
        )
        for n, (item_id, fields) in enumerate(zip(seed_ids(namespace), _SEED_FIELDS, strict=True))
    ]


_ids = itertools.count()
_PROJECT: Final = project_namespace("fuzz")
_TASK: Final = task_namespace("fuzz")
_SCOPE_FIELDS: Final[set[str | None]] = {"id", "project_id", "user_id", "task_id"}
"""The Task fields its memory's scope is built from, and the name the scope gives the id."""


def _fresh_item(item_id: str | None = None) -> ContextItem:
    return ContextItem(id=item_id or f"fresh-{next(_ids)}", kind="note", namespace="fuzz")


def _reseed(backend: MemoryBackend, *, namespace: str = "fuzz", tier: Tier = Tier.PROJECT) -> None:
    """Put the seed items back as they were (earlier examples may have changed them)."""
    seeds = seed_items(namespace, tier)
    stored = {item.id: item for item in backend.get_many([item.id for item in seeds])}
    missing = [item for item in seeds if item.id not in stored]
    changed = [item for item in seeds if item.id in stored and not _same(stored[item.id], item)]
    if missing:
        backend.add_many(missing)
    if changed:
        backend.update_many(changed)


class BackendFuzz:
    """Adversarial input to the backend, tier store and assembler entry points on a backend."""

    @pytest.fixture
    def embedder(self) -> Embedder:
        """The embedder backends under test are built with (small and deterministic)."""
        return HashingEmbedder(dim=EMBED_DIM)

    @pytest.fixture
    def backend(self, embedder: Embedder) -> Iterator[MemoryBackend]:
        """Yield an empty backend built with ``embedder``; subclasses must override this."""
        raise NotImplementedError("override the `backend` fixture in your fuzz subclass")

    @pytest.fixture
    def seeded(self, backend: MemoryBackend) -> MemoryBackend:
        """The backend holding items at the edges of what is valid (they must store)."""
        _reseed(backend)
        return backend

    # ------------------------------------------------------------------ backend

    @fuzz_settings
    @example(case=("text", "a\ud800b"))
    @example(case=("tags", ["\x00"]))
    @example(case=("source", "x" * 256))
    @example(case=("payload", {"\udfff": 1}))
    @example(case=("payload", nested(5000)))
    @example(case=("token_cost", 2**63))
    @example(case=("access_count", MAX_COUNT + 1))
    @example(case=("importance", 10**400))
    @example(case=("timestamp", EDGE_MAX))
    @example(case=("provenance", "x"))
    @example(case=("embedding", [1e39] * EMBED_DIM))
    @example(case=("embedding", [3e38] * EMBED_DIM))
    @given(case=item_field_cases())
    def test_add(self, seeded: MemoryBackend, case: tuple[str, Any]) -> None:
        """An item with one adversarial field is refused naming it, or stored and read back.

        A builtin error here is a converter in ``models.py`` (or ``_validate.py``) letting a
        value through that a backend then chokes on.
        """
        name, value = case
        fields = {"id": f"add-{next(_ids)}", "kind": "note", "namespace": "fuzz", name: value}

        def call() -> ContextItem:
            item = ContextItem(**fields)
            seeded.add(item)
            return item

        item = attempt(seeded, call, {name})
        if isinstance(item, ContextItem):
            assert _same(seeded.get(item.id), item)

    @fuzz_settings
    @example(batch=None, update=False)
    @example(batch=5, update=True)
    @given(
        batch=st.one_of(
            wrong_types,
            extreme_ints,
            bad_texts,
            st.lists(st.one_of(st.builds(_fresh_item), wrong_types, bad_texts), max_size=3),
            st.builds(_fresh_item),
            st.builds(lambda: [_fresh_item("twice"), _fresh_item("twice")]),
            st.builds(lambda: (_fresh_item() for _ in range(2))),
        ),
        update=st.booleans(),
    )
    def test_add_many_and_update_many(
        self, seeded: MemoryBackend, batch: Any, update: bool
    ) -> None:
        """Anything but a collection of items is refused naming ``items`` and stores nothing."""
        call = seeded.update_many if update else seeded.add_many
        attempt(seeded, lambda: call(batch), {"items", "id"})

    @fuzz_settings
    @given(case=item_field_cases(), seed=st.integers(0, len(_SEED_FIELDS) - 1))
    def test_update(self, seeded: MemoryBackend, case: tuple[str, Any], seed: int) -> None:
        """A stored item changed in one adversarial field is refused naming it, or replaced."""
        name, value = case
        original = seed_items()[seed]

        def call() -> ContextItem:
            item = attrs.evolve(original, **{name: value})
            seeded.update(item)
            return item

        item = attempt(seeded, call, {name})
        if isinstance(item, ContextItem):
            # Equal but for the vector: a changed text is embedded again.
            assert seeded.get(item.id) == item
        _reseed(seeded)

    @fuzz_settings
    @example(operation="get", item_id="\ud800", many=[], at=_T0, tokens=None)
    @example(operation="get_many", item_id="a", many=None, at=_T0, tokens=None)
    @example(operation="delete_many", item_id="a", many=7, at=_T0, tokens=None)
    @example(operation="touch", item_id="a", many=seed_ids(), at=EDGE_MAX, tokens=None)
    @example(operation="touch", item_id="a", many=seed_ids(), at=_T0, tokens=None)
    @example(operation="set_archived", item_id="a", many=seed_ids(), at=EDGE_MAX, tokens=None)
    @example(operation="erase", item_id="a", many=seed_ids(), at=_T0, tokens="not a mapping")
    @given(
        operation=st.sampled_from(
            ["get", "delete", "get_many", "delete_many", "touch", "set_archived", "erase"]
        ),
        item_id=st.one_of(st.sampled_from(seed_ids()), adversarial, keys),
        many=st.one_of(
            st.lists(st.one_of(st.sampled_from(seed_ids()), adversarial)),
            wrong_types,
            extreme_ints,
            bad_texts,
            st.just([f"id-{n}" for n in range(6000)]),
        ),
        at=st.one_of(_storable_datetimes, extreme_datetimes, wrong_types),
        tokens=st.one_of(st.none(), wrong_types, bad_texts, st.just({"seed-fuzz-0": "forged"})),
    )
    def test_ids(
        self,
        seeded: MemoryBackend,
        *,
        operation: str,
        item_id: Any,
        many: Any,
        at: Any,
        tokens: Any,
    ) -> None:
        """Ids, lists of ids, access times and erasure tokens: refused naming them, or served."""
        calls: dict[str, tuple[Callable[[], Any], set[str | None]]] = {
            "get": (lambda: seeded.get(item_id), {"id"}),
            "delete": (lambda: seeded.delete(item_id), {"id"}),
            "get_many": (lambda: seeded.get_many(many), {"id", "item_ids"}),
            "delete_many": (lambda: seeded.delete_many(many), {"id", "item_ids"}),
            "touch": (lambda: seeded.touch(many, at), {"id", "item_ids", "at"}),
            "set_archived": (
                lambda: seeded.set_archived(many, at, ArchiveReason.MANUAL),
                {"id", "item_ids", "at"},
            ),
            "erase": (lambda: seeded.erase(many, tokens=tokens), {"id", "item_ids", "tokens"}),
        }
        call, fields = calls[operation]
        attempt(seeded, call, fields)
        snapshot(seeded)  # whatever was written must read back
        _reseed(seeded)

    @fuzz_settings
    @example(
        target="filters",
        case=({"kind": "\ud800"}, {"kind"}),
        limit=10,
        order_by="+id",
        operation="query",
    )
    @example(
        target="filters",
        case=({"tags": "a\x00"}, {"tags"}),
        limit=10,
        order_by="+id",
        operation="count",
    )
    @example(
        target="filters",
        case=({"access_count": {"$lt": 2**40}}, {"access_count"}),
        limit=10,
        order_by="+id",
        operation="query",
    )
    @example(
        target="filters",
        case=({"importance": {"$gt": 10**400}}, {"importance"}),
        limit=10,
        order_by="+id",
        operation="clear",
    )
    @example(
        target="filters",
        case=({"timestamp": {"$lt": EDGE_MAX}}, {"timestamp"}),
        limit=10,
        order_by="+id",
        operation="query",
    )
    @example(target="limit", case=(None, {None}), limit=2**70, order_by="+id", operation="query")
    @example(target="order_by", case=(None, {None}), limit=1, order_by="\ud800", operation="query")
    @given(
        target=st.sampled_from(["filters", "limit", "order_by"]),
        case=_filter_cases(),
        limit=_LIMITS,
        order_by=_ORDERS,
        operation=st.sampled_from(["query", "count", "clear", "lexical_index"]),
    )
    def test_filters(
        self,
        seeded: MemoryBackend,
        *,
        target: str,
        case: tuple[Any, set[str | None]],
        limit: Any,
        order_by: Any,
        operation: str,
    ) -> None:
        """Filter documents, limits and orders: refused naming the part, or answered."""
        document, fields = case if target == "filters" else (None, _named(target))
        if target != "limit":
            limit = 10
        if target != "order_by":
            order_by = DEFAULT_ORDER
        calls: dict[str, Callable[[], Any]] = {
            "query": lambda: seeded.query(document, limit, order_by),
            "count": lambda: seeded.count(document),
            "clear": lambda: seeded.clear(document),
            "lexical_index": lambda: seeded.lexical_index(document),
        }
        if operation == "lexical_index":
            fields = {*fields, "filters"}
        attempt(seeded, calls[operation], fields)
        _reseed(seeded)

    @fuzz_settings
    @example(target="query", query="\ud800", k=1, case=(None, {None}), lexical=False)
    @example(target="query", query="\ud800", k=1, case=(None, {None}), lexical=True)
    @example(target="query", query=[10**400] * EMBED_DIM, k=1, case=(None, {None}), lexical=False)
    @example(target="query", query=[3e38] * EMBED_DIM, k=1, case=(None, {None}), lexical=False)
    @example(target="k", query="a", k=2**70, case=(None, {None}), lexical=False)
    @given(
        target=st.sampled_from(["query", "k", "filters"]),
        query=_QUERIES,
        k=_KS,
        case=_filter_cases(),
        lexical=st.booleans(),
    )
    def test_search(
        self,
        seeded: MemoryBackend,
        *,
        target: str,
        query: Any,
        k: Any,
        case: tuple[Any, set[str | None]],
        lexical: bool,
    ) -> None:
        """Search queries (texts and vectors), ``k`` and filters: refused naming them, or served."""
        document, fields = case if target == "filters" else (None, _named(target))
        if target != "query":
            query = "sqlite note"
        if target != "k":
            k = 5
        search = seeded.lexical_search if lexical else seeded.search
        attempt(seeded, lambda: search(query, k, document), fields)

    @fuzz_settings
    @example(target="namespace", value="\ud800")
    @example(target="limit", value=2**64)
    @example(target="actions", value=["nope"])
    @given(
        target=st.sampled_from(["namespace", "since", "until", "actions", "limit"]),
        value=st.one_of(
            adversarial,
            keys,
            st.lists(st.one_of(st.sampled_from(["add", "erase"]), bad_texts), max_size=2),
            st.integers(0, 10),
        ),
    )
    def test_audit_queries(self, seeded: MemoryBackend, target: str, value: Any) -> None:
        """The journal's queries: each argument refused naming it, or answered."""
        calls: dict[str, Callable[[], Any]] = {
            "namespace": lambda: seeded.audit.count(namespace=value),
            "since": lambda: seeded.audit.events(since=value),
            "until": lambda: seeded.audit.events(until=value),
            "actions": lambda: seeded.audit.events(actions=value),
            "limit": lambda: seeded.audit.events(limit=value),
        }
        attempt(seeded, calls[target], {target})

    # ------------------------------------------------------------------ tier stores

    @fuzz_settings
    @given(
        name=st.sampled_from(
            ["kind", "text", "importance", "tags", "payload", "source", "status", "expires_at"]
        ),
        data=st.data(),
    )
    def test_tier_new_item_and_add(
        self, backend: MemoryBackend, name: str, data: st.DataObject
    ) -> None:
        """``new_item`` with one adversarial argument refuses naming it, or the item stores."""
        store = ProjectMemoryStore("fuzz", backend)
        value = data.draw(_ITEM_FIELDS[name], label=name)
        arguments: dict[str, Any] = {"kind": "note", "text": "tier item", name: value}

        def call() -> ContextItem:
            return store.add(store.new_item(**arguments))

        item = attempt(backend, call, {name})
        if isinstance(item, ContextItem):
            assert _same(store.get(item.id), item)

    @fuzz_settings
    @given(
        operation=st.sampled_from(
            [
                "get",
                "require",
                "pin",
                "unpin",
                "delete",
                "get_many",
                "delete_many",
                "forget",
                "promote",
            ]
        ),
        item_id=st.one_of(st.sampled_from(seed_ids(_PROJECT) + seed_ids(_TASK)), adversarial, keys),
        many=st.one_of(
            st.lists(st.one_of(st.sampled_from(seed_ids(_PROJECT)), adversarial), max_size=3),
            wrong_types,
            bad_texts,
        ),
        reason=st.one_of(_texts(), bad_texts, wrong_types),
    )
    def test_tier_ids(
        self, backend: MemoryBackend, operation: str, item_id: Any, many: Any, reason: Any
    ) -> None:
        """Tier store reads and writes by id, and promotion: refused naming the argument."""
        project = ProjectMemoryStore("fuzz", backend)
        task = TaskMemoryStore("fuzz", backend, project_id="fuzz")
        _reseed(backend, namespace=project.namespace)
        _reseed(backend, namespace=task.namespace, tier=Tier.TASK)
        calls: dict[str, tuple[Callable[[], Any], set[str | None]]] = {
            "get": (lambda: project.get(item_id), {"id"}),
            "require": (lambda: project.require(item_id), {"id"}),
            "pin": (lambda: project.pin(item_id), {"id"}),
            "unpin": (lambda: project.unpin(item_id), {"id"}),
            "delete": (lambda: project.delete(item_id), {"id"}),
            "get_many": (lambda: project.get_many(many), {"id", "item_ids"}),
            "delete_many": (lambda: project.delete_many(many), {"id", "item_ids"}),
            "forget": (lambda: project.forget(item_id), {"id", "item_ids"}),
            "promote": (
                lambda: promote(task, project, item_id, reason=reason),
                {"id", "reason"},
            ),
        }
        call, fields = calls[operation]
        attempt(backend, call, fields)

    @fuzz_settings
    @given(
        target=st.sampled_from(["namespace", "items", "update", "filters", "output"]),
        namespace=st.one_of(keys, bad_texts),
        batch=st.one_of(wrong_types, bad_texts, st.lists(wrong_types, min_size=1, max_size=2)),
        case=item_field_cases(),
        filters=_filter_cases(),
        output=st.one_of(_payloads, deep_values, wrong_types, bad_texts, extreme_floats),
    )
    def test_tier_store_arguments(
        self,
        backend: MemoryBackend,
        *,
        target: str,
        namespace: Any,
        batch: Any,
        case: tuple[str, Any],
        filters: tuple[Any, set[str | None]],
        output: Any,
    ) -> None:
        """Store names, batches, updates, filters and tool outputs: refused naming them."""
        _reseed(backend, namespace=_PROJECT)
        project = ProjectMemoryStore("fuzz", backend)
        global_ = GlobalMemoryStore(backend, "fuzz", confirm=lambda _: True)
        task = TaskMemoryStore("fuzz", backend)
        name, value = case
        original = seed_items(_PROJECT)[0]
        document, filter_fields = filters
        calls: dict[str, tuple[Callable[[], Any], set[str | None]]] = {
            "namespace": (lambda: ProjectMemoryStore(namespace, backend), {"project_id"}),
            "items": (lambda: global_.add_many(batch), {"items"}),
            "update": (lambda: project.update(attrs.evolve(original, **{name: value})), {name}),
            "filters": (lambda: project.query(document), filter_fields),
            "output": (lambda: task.add_tool_output("tool", output), {"output"}),
        }
        call, fields = calls[target]
        attempt(backend, call, fields)

    # ------------------------------------------------------------------ assembler

    @fuzz_settings
    @example(
        target=ContextRequest,
        task_case=("id", "t"),
        request_case=("budget_tokens", 10**400),
        wrong=None,
    )
    @example(target=ContextRequest, task_case=("id", "t"), request_case=("shares", "x"), wrong=None)
    @example(target=ContextRequest, task_case=("id", "t"), request_case=("profile", 5), wrong=None)
    @example(target="task", task_case=("id", "t"), request_case=("query", ""), wrong=None)
    @example(
        target=Task, task_case=("metadata", nested(5000)), request_case=("query", ""), wrong=None
    )
    @given(
        target=st.sampled_from([Task, ContextRequest, "task", "request"]),
        task_case=model_field_cases(Task),
        request_case=model_field_cases(ContextRequest),
        wrong=st.one_of(wrong_types, bad_texts, extreme_ints),
    )
    def test_build_context(
        self,
        backend: MemoryBackend,
        target: Any,
        task_case: tuple[str, Any],
        request_case: tuple[str, Any],
        wrong: Any,
    ) -> None:
        """build_context with one adversarial part of its task or request: refused naming it."""
        assembler = ContextAssembler(
            MemoryStores(backend, task_backend=backend, confirm=lambda _: True),
            config=AssemblerConfig(profiles={"coding": TierShares(0.6, 0.3, 0.1)}),
        )
        _reseed(backend, namespace=project_namespace("default"))
        _reseed(backend, namespace=task_namespace("task-1"), tier=Tier.TASK)
        task_fields = dict(MODEL_BASES[Task])
        request_fields = dict(MODEL_BASES[ContextRequest])
        fields: set[str | None]
        if target is Task:
            task_fields[task_case[0]] = task_case[1]
            fields = {task_case[0]}
            if task_case[0] in _SCOPE_FIELDS:
                # The task's memory is scoped by its three ids together: ids valid for a task
                # can still make a namespace too long, reported under ``task_id``.
                fields |= _SCOPE_FIELDS
        elif target is ContextRequest:
            request_fields[request_case[0]] = request_case[1]
            fields = {request_case[0]}
        else:
            fields = {target}

        def call() -> Any:
            task = wrong if target == "task" else Task(**task_fields)
            request = wrong if target == "request" else ContextRequest(**request_fields)
            return assembler.build_context(task, request, strict=True)

        attempt(backend, call, fields)
