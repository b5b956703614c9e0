"""The context node in real compiled StateGraphs, invoked and ainvoked.

A graph's first node writes a memory through the graph's store (an AgentEngineStore over the
assembler's stores); the context node builds the step's context, which must hold it; the
last node reads the context from the state, as a model's node would.
"""

from __future__ import annotations

import threading
from typing import Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from agent_engine import ContextAssembler, ContextRequest, Task
from agent_engine.assembler import ContextPackage
from agent_engine.errors import ValidationError
from agent_engine.integrations.langgraph import (
    AgentEngineStore,
    ContextNode,
    context_node,
    scope_namespace,
    step_query,
)
from tests.langgraph.conftest import run_async

TASK = Task(id="checkout-fix", project_id="shop", user_id="ada", description="fix the checkout")


class State(TypedDict, total=False):
    query: str
    task_id: str
    context: str
    package: Any
    answer: str


def _remember(state: State, runtime: Runtime) -> dict[str, Any]:
    namespace = scope_namespace("project", TASK, "facts")
    runtime.store.put(namespace, "refunds", {"text": "Refunds go through the payments queue"})
    return {}


def _answer(state: State) -> dict[str, Any]:
    return {"answer": f"seen {len(state['context'])} characters"}


def _graph(node) -> StateGraph:
    graph = StateGraph(State)
    graph.add_node("remember", _remember)
    graph.add_node("context", node)
    graph.add_node("answer", _answer)
    graph.add_edge(START, "remember")
    graph.add_edge("remember", "context")
    graph.add_edge("context", "answer")
    graph.add_edge("answer", END)
    return graph


@pytest.fixture
def assembler(stores):
    return ContextAssembler(stores)


@pytest.fixture
def app(assembler):
    store = AgentEngineStore(assembler.stores, fields=["text"])
    yield _graph(context_node(assembler, task=TASK, budget_tokens=400)).compile(store=store)
    store.close()


class TestInAGraph:
    def test_invoke_builds_the_context_from_what_the_graph_stored(self, app):
        out = app.invoke({"query": "how are refunds handled?"})
        assert "Refunds go through the payments queue" in out["context"]
        assert "Project memory" in out["context"]
        assert out["answer"].startswith("seen ")

    @run_async
    async def test_ainvoke_too(self, app):
        out = await app.ainvoke({"query": "how are refunds handled?"})
        assert "Refunds go through the payments queue" in out["context"]

    @run_async
    async def test_the_async_path_builds_on_a_worker_thread(self, assembler):
        """A build reads stores; under ainvoke it must not run on the event loop's thread."""
        threads = []

        def request(state):
            threads.append(threading.current_thread())
            return ContextRequest(300, query=state["query"])

        node = context_node(assembler, task=TASK, request=request)
        store = AgentEngineStore(assembler.stores, fields=["text"])
        out = await _graph(node).compile(store=store).ainvoke({"query": "refunds"})
        store.close()
        assert "payments queue" in out["context"]
        assert threads
        assert threading.current_thread() not in threads

    def test_the_task_can_come_from_the_state(self, assembler):
        """A graph serving many tasks names the task in its state."""
        store = AgentEngineStore(assembler.stores, fields=["text"])

        def task_of(state):
            return Task(id=state["task_id"], project_id="shop", user_id="ada")

        node = context_node(assembler, task=task_of, package_key="package")
        out = _graph(node).compile(store=store).invoke({"task_id": "t9", "query": "refunds"})
        assert isinstance(out["package"], ContextPackage)
        assert "payments queue" in out["context"]
        assert out["context"] == out["package"].render()

    def test_the_render_format_and_key_are_the_nodes(self, assembler):
        node = ContextNode(assembler, task=TASK, key="memory", render_format="xml")
        stores = assembler.stores
        project = stores.project_store("shop")
        project.add(project.new_item("decision", "Refunds go through the payments queue"))
        update = node({"query": "refunds"})
        assert list(update) == ["memory"]
        assert "<project_memory>" in update["memory"]


class TestStepQuery:
    @pytest.mark.parametrize(
        ("state", "query"),
        [
            ({"query": "refunds"}, "refunds"),
            ({"query": "  ", "messages": [HumanMessage("from messages")]}, "from messages"),
            ({"messages": [HumanMessage("asked"), AIMessage("answered")]}, "asked"),
            ({"messages": [AIMessage("only the model spoke")]}, "only the model spoke"),
            ({"messages": [{"role": "user", "content": "a mapping"}]}, "a mapping"),
            ({"messages": [("user", "a pair"), ("assistant", "reply")]}, "a pair"),
            (
                {
                    "messages": [
                        HumanMessage(
                            content=[
                                {"type": "text", "text": "part one"},
                                {"type": "image_url", "image_url": {"url": "x"}},
                                "part two",
                            ]
                        )
                    ]
                },
                "part one\npart two",
            ),
            ({"messages": []}, ""),
            ({}, ""),
        ],
    )
    def test_what_a_step_is_about(self, state, query):
        assert step_query(state) == query

    def test_an_object_state(self):
        class Snapshot:
            query = "from an attribute"

        assert step_query(Snapshot()) == "from an attribute"


class TestBadSettings:
    @pytest.mark.parametrize(
        "settings",
        [
            {"task": "checkout-fix"},
            {"task": TASK, "budget_tokens": -1},
            {"task": TASK, "key": ""},
            {"task": TASK, "render_format": "html"},
            {"task": TASK, "request": "not callable"},
        ],
    )
    def test_refused_when_the_node_is_made(self, assembler, settings):
        with pytest.raises(ValidationError):
            ContextNode(assembler, **settings)

    def test_an_assembler_is_required(self, stores):
        with pytest.raises(ValidationError):
            ContextNode(stores, task=TASK)
