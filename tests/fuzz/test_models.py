"""Adversarial values for the models: constructed, or refused with the field named.

A refusal must be a ValidationError (never attrs' TypeError, an OverflowError from a float
conversion or a RecursionError from the JSON encoder) and name the field that was wrong.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from agent_engine.errors import AgentEngineError, ValidationError
from agent_engine.models import ContextItem, ContextRequest, Provenance, Task, TierShares
from agent_engine.testing.fuzz import (
    EDGE_MAX,
    MODEL_BASES,
    error_fields,
    fuzz_settings,
    item_field_cases,
    model_field_cases,
    nested,
)


def _build(factory, fields: set[str | None]) -> Any:
    try:
        return factory()
    except ValidationError as caught:
        error = caught
    except AgentEngineError as error:
        pytest.fail(f"a model raised {error!r} rather than a ValidationError")
    except Exception as error:  # noqa: BLE001 - any builtin escaping is the failure reported
        pytest.fail(f"a builtin {type(error).__name__} escaped: {error!r}")
    assert error.field in fields, f"{error!r} names {error.field!r}, not one of {fields}"
    return error


class TestContextItemFuzz:
    @fuzz_settings
    @example(case=("text", "\ud800"))
    @example(case=("payload", nested(5000)))
    @example(case=("provenance", "x"))
    @example(case=("importance", 10**400))
    @example(case=("timestamp", EDGE_MAX))
    @given(case=item_field_cases())
    def test_constructor(self, case):
        """ContextItem(...) with one adversarial field is built or refused naming the field."""
        name, value = case
        fields = {"id": "a", "kind": "note", name: value}
        _build(lambda: ContextItem(**fields), {name})

    @fuzz_settings
    @example(case=("kind", "\udfff"))
    @example(case=("tags", [10**400]))
    @example(case=("provenance", {"source_item_id": "x"}))
    @given(case=item_field_cases())
    def test_create(self, case):
        """ContextItem.create(...) behaves as the constructor (a blank id means a fresh one)."""
        name, value = case
        fields = {"kind": "note", "text": "", name: value}
        kind, text = fields.pop("kind"), fields.pop("text")
        _build(lambda: ContextItem.create(kind, text, **fields), {name})


_MODELS = st.sampled_from([Task, ContextRequest, TierShares, Provenance]).flatmap(
    lambda model: st.tuples(st.just(model), model_field_cases(model))
)


class TestModelsFuzz:
    @fuzz_settings
    @example(case=(Task, ("metadata", nested(5000))))
    @example(case=(ContextRequest, ("shares", "x")))
    @example(case=(ContextRequest, ("profile", 5)))
    @example(case=(ContextRequest, ("budget_tokens", 10**400)))
    @example(case=(TierShares, ("task", 10**400)))
    @example(case=(Provenance, ("promoted_at", EDGE_MAX)))
    @given(case=_MODELS)
    def test_fields(self, case):
        """Task, ContextRequest, TierShares, Provenance: built, or refused naming the field."""
        model, (name, value) = case
        fields = {**MODEL_BASES[model], name: value}
        _build(lambda: model(**fields), error_fields(model, name))
