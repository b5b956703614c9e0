"""A ready LangGraph node: the context of a graph step, built by a ``ContextAssembler``.

``build_context`` is the one call an executor makes per step (``docs/architecture.md``); in a
LangGraph graph the executor is the graph, so the call is a node: it reads what the step is
about from the state, builds the package and writes the rendered context back into the state
for the model's node to put into its prompt. :func:`context_node` gives it as a runnable with
both paths, so ``graph.invoke`` builds on the calling thread and ``graph.ainvoke`` on a
worker thread, never blocking the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableLambda

from agent_engine import _validate
from agent_engine.assembler import ContextAssembler
from agent_engine.assembler.render import RenderFormat
from agent_engine.errors import ValidationError
from agent_engine.models import ContextRequest, Task

__all__ = ["ContextNode", "context_node", "step_query"]

_HUMAN = frozenset({"human", "user"})


class ContextNode:
    """Builds a step's context with ``assembler`` and returns it as a state update.

    ``task``: the :class:`~agent_engine.models.Task` the graph runs, or a function of the
    state giving it (a graph serving many tasks keeps the task's ids in its state). The
    request is ``request(state)`` when given, else a budget of ``budget_tokens`` and the
    query :func:`step_query` reads from the state. The update puts the rendered context
    (``render_format``, the assembler's layout's by default) under ``key`` and, with
    ``package_key``, the :class:`~agent_engine.assembler.package.ContextPackage` itself (an
    object a checkpointer may not serialize: leave it out of checkpointed state).

    Call it with a state (``node(state)``) or await :meth:`acall`; :meth:`runnable` gives a
    LangGraph node with both.
    """

    def __init__(
        self,
        assembler: ContextAssembler,
        *,
        task: Task | Callable[[Any], Task],
        budget_tokens: int = 2000,
        request: Callable[[Any], ContextRequest] | None = None,
        key: str = "context",
        package_key: str | None = None,
        render_format: RenderFormat | str | None = None,
    ) -> None:
        if not isinstance(assembler, ContextAssembler):
            raise ValidationError(
                f"assembler must be a ContextAssembler, got {type(assembler).__name__}",
                field="assembler",
                value=assembler,
            )
        if not isinstance(task, Task) and not callable(task):
            raise ValidationError(
                f"task must be a Task or a function of the state, got {type(task).__name__}",
                field="task",
                value=task,
            )
        if request is not None and not callable(request):
            raise ValidationError(
                "request must be a function of the state", field="request", value=request
            )
        self.assembler = assembler
        self.task = task
        self.budget_tokens = ContextRequest(budget_tokens).budget_tokens
        self.request = request
        self.key = _validate.identifier("key", key)
        self.package_key = (
            None if package_key is None else _validate.identifier("package_key", package_key)
        )
        self.render_format = (
            None
            if render_format is None
            else _validate.member("render_format", RenderFormat, render_format)
        )

    def __repr__(self) -> str:
        return f"ContextNode(key={self.key!r}, budget_tokens={self.budget_tokens})"

    def __call__(self, state: Any) -> dict[str, Any]:
        """The state update for one step: the rendered context (and the package)."""
        task = self.task(state) if callable(self.task) else self.task
        request = (
            self.request(state)
            if self.request is not None
            else ContextRequest(self.budget_tokens, query=step_query(state))
        )
        package = self.assembler.build_context(task, request)
        update: dict[str, Any] = {self.key: package.render(self.render_format)}
        if self.package_key is not None:
            update[self.package_key] = package
        return update

    async def acall(self, state: Any) -> dict[str, Any]:
        """:meth:`__call__` on a worker thread: a build reads stores and must not block the loop."""
        return await asyncio.to_thread(self, state)

    def runnable(self, name: str = "context") -> RunnableLambda[Any, dict[str, Any]]:
        """This node as a LangGraph node with a sync and an async path."""
        return RunnableLambda(self.__call__, afunc=self.acall, name=name)


def context_node(
    assembler: ContextAssembler,
    *,
    task: Task | Callable[[Any], Task],
    budget_tokens: int = 2000,
    request: Callable[[Any], ContextRequest] | None = None,
    key: str = "context",
    package_key: str | None = None,
    render_format: RenderFormat | str | None = None,
    name: str = "context",
) -> RunnableLambda[Any, dict[str, Any]]:
    """A graph node that builds each step's context (``graph.add_node("context", node)``).

    The options are :class:`ContextNode`'s; ``name`` is the runnable's name in traces.
    """
    node = ContextNode(
        assembler,
        task=task,
        budget_tokens=budget_tokens,
        request=request,
        key=key,
        package_key=package_key,
        render_format=render_format,
    )
    return node.runnable(name)


def step_query(state: Any) -> str:
    """What a step is about, read from a graph's state (``""`` when it says nothing).

    The state's ``query`` when it is text; else the text of its last human message (of the
    last message, when no human spoke) in ``messages``, as LangChain messages, ``{"role",
    "content"}`` mappings or ``(role, content)`` pairs. An empty query lets the assembler
    rank against the task's description.
    """
    query = _field(state, "query")
    if isinstance(query, str) and query.strip():
        return query
    messages = _field(state, "messages")
    if isinstance(messages, str) or not isinstance(messages, Sequence) or not messages:
        return ""
    spoken = [_role_and_text(message) for message in messages]
    human = [text for role, text in spoken if role in _HUMAN]
    return human[-1] if human else spoken[-1][1]


def _field(state: Any, name: str) -> Any:
    if isinstance(state, Mapping):
        return state.get(name)
    return getattr(state, name, None)


def _role_and_text(message: Any) -> tuple[str, str]:
    if isinstance(message, tuple) and len(message) == 2:  # noqa: PLR2004 - (role, content)
        role, content = message
    elif isinstance(message, Mapping):
        role, content = message.get("role", message.get("type")), message.get("content")
    else:
        role, content = getattr(message, "type", None), getattr(message, "content", None)
    return str(role or ""), _text(content)


def _text(content: Any) -> str:
    """A message's text: its content, or the text blocks of a multi-part content, joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = [
            block if isinstance(block, str) else str(block.get("text", ""))
            for block in content
            if isinstance(block, str)
            or (isinstance(block, Mapping) and block.get("type") == "text")
        ]
        return "\n".join(part for part in parts if part)
    return ""
