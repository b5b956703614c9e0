"""MemGPT memory tools: the schemas a model is offered, and its calls applied to the stores.

Real stores (in-memory backend, hashing embedder), calls in each provider's shape. Every
refused call must come back as an error result naming what was wrong, with nothing written.
"""

from __future__ import annotations

import json

import pytest

from agent_engine import ContextAssembler, ContextRequest, HashingEmbedder, InMemoryBackend, Task
from agent_engine.errors import ConfirmationDeclined, ItemNotFoundError, ValidationError
from agent_engine.tiers.stores import MemoryStores
from agent_engine.tools import (
    SPECS,
    MemoryTools,
    ToolCall,
    anthropic_tools,
    openai_tools,
)

SECRET = "ghp_" + "Zq7Lm2Xp9Rt4Vb6Nc8Kd1Hf3Jg5Ws0Ye2Ua4Io"
TASK = Task(id="t1", project_id="shop", user_id="ada", description="fix the checkout")


def _stores(confirm=None) -> MemoryStores:
    backend = InMemoryBackend(embedder=HashingEmbedder())
    return MemoryStores(backend, confirm=confirm)


def _openai(name, **arguments):
    return {
        "id": "call_1",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def _anthropic(name, **arguments):
    return {"type": "tool_use", "id": "toolu_1", "name": name, "input": arguments}


@pytest.fixture
def stores():
    return _stores()


@pytest.fixture
def tools(stores):
    return MemoryTools(stores, TASK)


def _counts(stores):
    return {tier.value: store.count(view="all") for tier, store in stores.for_task(TASK).items()}


class TestSchemas:
    def test_both_formats_offer_every_function_with_closed_schemas(self):
        names = [spec.name for spec in SPECS]
        assert names == [
            "memory_search",
            "memory_insert",
            "memory_promote",
            "memory_pin",
            "memory_forget",
        ]
        assert [tool["function"]["name"] for tool in openai_tools()] == names
        assert [tool["name"] for tool in anthropic_tools()] == names
        for tool in anthropic_tools():
            schema = tool["input_schema"]
            assert schema["type"] == "object"
            assert schema["additionalProperties"] is False
            assert set(schema["required"]) <= set(schema["properties"])
            assert all("type" in p for p in schema["properties"].values())
        for tool in openai_tools():
            assert tool["type"] == "function"
            assert tool["function"]["parameters"]["additionalProperties"] is False

    def test_the_schemas_are_json(self):
        """What an executor sends a provider: it must serialize as it is."""
        assert json.loads(json.dumps(openai_tools())) == openai_tools()
        assert json.loads(json.dumps(anthropic_tools())) == anthropic_tools()


class TestCalls:
    def test_insert_then_search_in_both_shapes(self, tools):
        inserted = tools.apply(
            _openai("memory_insert", text="Refunds go through the payments queue", kind="decision")
        )
        assert inserted.ok, inserted.content
        assert inserted.content["stored"] is True
        assert inserted.openai_message()["tool_call_id"] == "call_1"
        found = tools.apply(_anthropic("memory_search", query="how are refunds processed"))
        assert found.ok
        assert [hit["id"] for hit in found.content["results"]][:1] == [inserted.content["id"]]
        block = found.anthropic_block()
        assert block["tool_use_id"] == "toolu_1"
        assert block["is_error"] is False
        assert json.loads(block["content"]) == found.content

    def test_a_repeated_insert_merges_and_a_secret_is_redacted(self, tools, stores):
        first = tools.apply(_anthropic("memory_insert", text="Deploys run on Tuesdays"))
        again = tools.apply(_anthropic("memory_insert", text="Deploys run on Tuesdays"))
        assert again.content["stored"] is False
        assert again.content["merged_into"] == first.content["id"]
        leaked = tools.apply(_anthropic("memory_insert", text=f"the CI token is {SECRET}"))
        assert leaked.content["redacted"]
        stored = stores.project_store("shop").get(leaked.content["id"])
        assert SECRET not in stored.text

    def test_search_pages_in_the_archive(self, tools, stores):
        project = stores.project_store("shop")
        item = project.add(project.new_item("failure", "The cache stampede took checkout down"))
        project.archive(item.id)
        found = tools.apply(_anthropic("memory_search", query="cache stampede", tier="project"))
        [hit] = [hit for hit in found.content["results"] if hit["id"] == item.id]
        assert hit["archived"] is True

    def test_pin_promote_and_forget(self, tools, stores):
        note = stores.task_store(TASK).add_reasoning("The flaky test needs a fixed seed", "s1")
        promoted = tools.apply(_anthropic("memory_promote", id=note.id, to="project"))
        assert promoted.ok, promoted.content
        copy_id = promoted.content["id"]
        assert stores.project_store("shop").get(copy_id).provenance.source_item_id == note.id
        assert tools.apply(_anthropic("memory_pin", id=copy_id)).content["pinned"] is True
        unpinned = tools.apply(_anthropic("memory_pin", id=copy_id, pinned=False))
        assert unpinned.content["pinned"] is False
        assert tools.apply(_anthropic("memory_forget", id=copy_id)).content["forgotten"] is True
        assert stores.project_store("shop").get(copy_id) is None

    def test_global_writes_are_refused_unless_allowed(self, stores):
        project = stores.project_store("shop")
        item = project.add(project.new_item("preference", "Ada prefers tabs"))
        before = _counts(stores)
        refused = MemoryTools(stores, TASK).apply(
            _anthropic("memory_promote", id=item.id, to="global")
        )
        assert isinstance(refused.error, ValidationError)
        assert refused.error.field == "tier"
        assert _counts(stores) == before
        allowed = _stores(confirm=lambda request: True)
        project = allowed.project_store("shop")
        item = project.add(project.new_item("preference", "Ada prefers tabs"))
        result = MemoryTools(allowed, TASK, allow_global=True).apply(
            _anthropic("memory_promote", id=item.id, to="global")
        )
        assert result.ok, result.content
        assert allowed.global_store("ada").get(result.content["id"]) is not None

    def test_the_confirmation_callback_still_decides(self):
        """Allowed global writes still go through the store's confirmation rule."""
        stores = _stores(confirm=lambda request: False)
        result = MemoryTools(stores, TASK, allow_global=True).apply(
            _anthropic("memory_insert", text="Ada works in UTC", kind="preference", tier="global")
        )
        assert isinstance(result.error, ConfirmationDeclined)
        assert stores.global_store("ada").count() == 0

    def test_another_projects_memory_is_out_of_reach(self, tools, stores):
        other = stores.project_store("billing")
        item = other.add(other.new_item("decision", "Invoices are immutable"))
        for call in (
            _anthropic("memory_forget", id=item.id),
            _anthropic("memory_pin", id=item.id),
            _anthropic("memory_promote", id=item.id, to="global"),
        ):
            result = MemoryTools(stores, TASK, allow_global=True).apply(call)
            assert isinstance(result.error, ItemNotFoundError), call
        assert other.get(item.id) is not None
        assert not other.get(item.id).pinned


class TestBadCalls:
    @pytest.mark.parametrize(
        ("call", "field"),
        [
            (_anthropic("memory_delete_everything"), "name"),
            (_anthropic("memory_insert"), "text"),
            (_anthropic("memory_insert", text="x", colour="red"), "colour"),
            (_anthropic("memory_insert", text="x", importance=2), "importance"),
            (_anthropic("memory_insert", text="x", importance=True), "importance"),
            (_anthropic("memory_insert", text="x", kind="secret"), "kind"),
            (_anthropic("memory_insert", text="x", tags=[1]), "tags"),
            (_anthropic("memory_insert", text="   "), "text"),
            (_anthropic("memory_search", query="x", limit="5"), "limit"),
            (_anthropic("memory_search", query="x", limit=500), "limit"),
            (_anthropic("memory_search", query="x", tier="everything"), "tier"),
            (_anthropic("memory_promote", id="x"), "to"),
            (
                {"id": "c", "function": {"name": "memory_search", "arguments": "{query"}},
                "arguments",
            ),
            ({"type": "tool_use", "name": "memory_search", "input": ["x"]}, "arguments"),
            ({"type": "tool_use", "input": {}}, "name"),
            ("memory_search", "call"),
        ],
    )
    def test_refused_with_the_argument_named_and_nothing_written(self, tools, stores, call, field):
        before = _counts(stores)
        result = tools.apply(call)
        assert not result.ok
        assert isinstance(result.error, ValidationError)
        assert result.error.field == field
        assert result.content["error"] == "ValidationError"
        assert result.content["field"] == field
        assert result.anthropic_block()["is_error"] is True
        assert _counts(stores) == before
        with pytest.raises(ValidationError):
            result.raise_for_error()

    def test_null_takes_the_default(self, tools):
        """Models send ``null`` for optional arguments they do not use."""
        result = tools.apply(ToolCall("memory_search", {"query": "x", "tier": None, "limit": None}))
        assert result.ok, result.content

    def test_a_missing_id_is_not_found(self, tools):
        result = tools.apply(_anthropic("memory_forget", id="project:shop/nothing-here"))
        assert isinstance(result.error, ItemNotFoundError)


class TestPressure:
    def _package(self, budget):
        stores = _stores()
        project = stores.project_store("shop")
        project.add_many(
            project.new_item("decision", f"Decision {n}: the checkout uses service {n} " * 3)
            for n in range(40)
        )
        assembler = ContextAssembler(stores)
        return assembler.build_context(
            TASK, ContextRequest(budget_tokens=budget, query="checkout service")
        )

    def test_a_tight_budget_pages_out_and_says_so(self):
        pressure = self._package(300).pressure
        project = next(t for t in pressure.tiers if t.tier.value == "project")
        assert project.paged_out > 0
        assert project.paged_out_tokens > 0
        assert project.near_budget
        assert pressure.under_pressure
        message = pressure.message()
        assert "project: " in message
        assert f"{pressure.paged_out} relevant memories" in message

    def test_room_for_everything_is_no_pressure(self):
        pressure = self._package(100_000).pressure
        assert pressure.paged_out == 0
        assert not pressure.under_pressure
        assert pressure.message() == ""
