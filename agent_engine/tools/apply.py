"""Applying a model's memory call to the stores, with the checks the library makes.

An executor offers the functions of :mod:`.schemas` to its model and hands every call the
model makes to :meth:`MemoryTools.apply`, in whichever shape its provider gave it (OpenAI's
``tool_calls`` entries, Anthropic's ``tool_use`` blocks, or a :class:`ToolCall`). The call is
checked against its schema first (unknown function, missing, extra or ill-typed arguments),
then runs through the tier stores as any other caller's would: redaction and near-duplicate
merging on insert, the promotion rules, ownership of the id (a call reaches only this task,
its project and, when allowed, its user's global memory). A refusal is not raised: it comes
back as a :class:`ToolResult` the model reads (the error's type and message), so the model
can correct itself, and nothing was written. Failures of the store itself
(:class:`~agent_engine.errors.BackendError`) come back the same way; anything else is a bug
and is raised.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs

from agent_engine.errors import AgentEngineError, ItemNotFoundError, ValidationError
from agent_engine.models import ContextItem, Task
from agent_engine.retrieval.fusion import rrf
from agent_engine.tiers.base import TierStore
from agent_engine.tiers.promotion import promote
from agent_engine.tiers.stores import MemoryStores
from agent_engine.tiers.views import View
from agent_engine.tools.schemas import ToolSpec, spec

__all__ = ["MemoryTools", "ToolCall", "ToolResult"]

TEXT_LIMIT: Final = 600
"""Characters of a memory's text a search hit carries (the rest is marked cut)."""
_JSON_TYPES: Final[Mapping[str, tuple[type, ...]]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list, tuple),
}


@attrs.frozen
class ToolCall:
    """A call of one memory function: its name, its arguments, the provider's call id."""

    name: str
    arguments: Mapping[str, Any]
    id: str = ""

    @classmethod
    def of(cls, call: ToolCall | Mapping[str, Any]) -> ToolCall:
        """A call in any provider's shape (see the module docstring); else a ValidationError."""
        if isinstance(call, ToolCall):
            return call
        if not isinstance(call, Mapping):
            raise ValidationError(
                f"a tool call is a mapping, got {type(call).__name__}", field="call", value=call
            )
        call_id = call.get("id") or ""
        function = call.get("function")
        inner: Mapping[str, Any] = function if isinstance(function, Mapping) else call
        name = inner.get("name")
        if not isinstance(name, str) or not name:
            raise ValidationError("a tool call names its function", field="name", value=name)
        if "input" in inner:  # Anthropic's tool_use block
            arguments = inner["input"]
        else:  # OpenAI's function call: arguments as JSON text
            arguments = inner.get("arguments", {})
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments) if arguments.strip() else {}
                except json.JSONDecodeError as error:
                    raise ValidationError(
                        f"the arguments of {name} are not JSON: {error}",
                        field="arguments",
                        value=arguments,
                    ) from None
        if not isinstance(arguments, Mapping):
            raise ValidationError(
                f"the arguments of {name} are an object, got {type(arguments).__name__}",
                field="arguments",
                value=arguments,
            )
        return cls(name, dict(arguments), str(call_id))


@attrs.frozen
class ToolResult:
    """What a call did, as the model reads it (:meth:`text`), and the error, if it was refused."""

    call: ToolCall
    content: Mapping[str, Any]
    error: AgentEngineError | None = None

    @classmethod
    def refused(cls, call: ToolCall, error: AgentEngineError) -> ToolResult:
        """The answer to a refused call: the error's type, message and, if known, argument."""
        content: dict[str, Any] = {"error": type(error).__name__, "message": str(error)}
        field = getattr(error, "field", None)
        if isinstance(field, str):
            content["field"] = field
        return cls(call, content, error)

    @property
    def ok(self) -> bool:
        """Whether the call ran (``False``: refused, nothing written)."""
        return self.error is None

    def text(self) -> str:
        """The content as JSON text: what goes back to the model."""
        return json.dumps(self.content, ensure_ascii=False, sort_keys=True)

    def openai_message(self) -> dict[str, Any]:
        """The ``tool`` message answering the call in an OpenAI chat."""
        return {"role": "tool", "tool_call_id": self.call.id, "content": self.text()}

    def anthropic_block(self) -> dict[str, Any]:
        """The ``tool_result`` block answering the call in an Anthropic message."""
        return {
            "type": "tool_result",
            "tool_use_id": self.call.id,
            "content": self.text(),
            "is_error": not self.ok,
        }

    def raise_for_error(self) -> None:
        """Raise the error the call was refused with, if any (for callers that prefer it)."""
        if self.error is not None:
            raise self.error


class MemoryTools:
    """The memory functions of one task: its memory, its project's and its user's.

    ``allow_global``: whether the model may write the user's global memory (insert into it,
    promote into it). Off by default: a global write outlives every project, and the model
    is not the user; on, the global store's confirmation callback still decides.
    """

    def __init__(self, stores: MemoryStores, task: Task, *, allow_global: bool = False) -> None:
        by_tier = stores.for_task(task)
        self.task = task
        self.allow_global = allow_global
        self._stores: dict[str, TierStore] = {tier.value: store for tier, store in by_tier.items()}
        self._handlers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "memory_search": self._search,
            "memory_insert": self._insert,
            "memory_promote": self._promote,
            "memory_pin": self._pin,
            "memory_forget": self._forget,
        }

    def apply(self, call: ToolCall | Mapping[str, Any]) -> ToolResult:
        """Run one call; a refusal comes back as a result with its error (see the module)."""
        parsed = ToolCall("", {})
        try:
            parsed = ToolCall.of(call)
            tool = spec(parsed.name)
            if tool is None:
                raise ValidationError(
                    f"no memory function {parsed.name!r}; there are {', '.join(self._handlers)}",
                    field="name",
                    value=parsed.name,
                )
            content = self._handlers[tool.name](checked_arguments(tool, parsed.arguments))
        except AgentEngineError as error:
            return ToolResult.refused(parsed, error)
        return ToolResult(parsed, content)

    # ------------------------------------------------------------------ the functions

    def _search(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Each tier asked is searched by meaning and by words, the archive included."""
        query, limit = arguments["query"], arguments["limit"]
        tiers = list(self._stores) if arguments["tier"] == "all" else [arguments["tier"]]
        found: dict[str, ContextItem] = {}
        rankings: list[list[str]] = []
        for tier in tiers:
            store = self._stores[tier]
            if store.query_embedder is not None:
                _, hits = store.search_text(query, limit, view=View.CURRENT)
                rankings.append([hit.item.id for hit in hits])
                found.update((hit.item.id, hit.item) for hit in hits)
            best = store.lexical().hits(query).best(limit)
            items = {item.id: item for item in store.get_many(best)}
            rankings.append([item_id for item_id in best if item_id in items])
            found.update(items)
        fused = rrf(rankings)
        ranked = sorted(fused, key=lambda item_id: (-fused[item_id], item_id))[:limit]
        return {"query": query, "results": [_hit(found[item_id]) for item_id in ranked]}

    def _insert(self, arguments: dict[str, Any]) -> dict[str, Any]:
        tier = arguments["tier"]
        if tier == "global":
            self._require_global("insert into global memory")
        store = self._stores[tier]
        item = store.new_item(
            arguments["kind"],
            arguments["text"],
            tags=list(arguments["tags"]),
            importance=float(arguments["importance"]),
            source="agent",
        )
        [outcome] = store.add_outcomes([item])
        result: dict[str, Any] = {
            "id": outcome.item.id,
            "tier": tier,
            "stored": not outcome.merged,
            "merged_into": outcome.merged_into,
        }
        if outcome.redacted:
            result["redacted"] = dict(outcome.redacted)
        return result

    def _promote(self, arguments: dict[str, Any]) -> dict[str, Any]:
        target = arguments["to"]
        if target == "global":
            self._require_global("promote into global memory")
        source = self._stores["task" if target == "project" else "project"]
        item_id = arguments["id"]
        if not _holds(source, item_id):
            raise ItemNotFoundError(item_id)
        result = promote(source, self._stores[target], item_id, reason=arguments["reason"])
        return {"id": result.item.id, "tier": target, "duplicate": result.duplicate}

    def _pin(self, arguments: dict[str, Any]) -> dict[str, Any]:
        store, item_id = self._holder(arguments["id"])
        pinned = bool(arguments["pinned"])
        item = store.pin(item_id) if pinned else store.unpin(item_id)
        return {"id": item.id, "pinned": item.pinned}

    def _forget(self, arguments: dict[str, Any]) -> dict[str, Any]:
        store, item_id = self._holder(arguments["id"])
        return {"id": item_id, "forgotten": store.forget(item_id) > 0}

    # ------------------------------------------------------------------ checks

    def _require_global(self, what: str) -> None:
        if not self.allow_global:
            raise ValidationError(
                f"this agent may not {what}: global memory is the user's, across projects",
                field="tier",
                value="global",
            )

    def _holder(self, item_id: str) -> tuple[TierStore, str]:
        """The store of ``item_id`` among those the model may change (global only if allowed)."""
        for tier, store in self._stores.items():
            if tier == "global" and not self.allow_global:
                continue
            if _holds(store, item_id):
                return store, item_id
        raise ItemNotFoundError(item_id)


def _holds(store: TierStore, item_id: str) -> bool:
    """Whether ``item_id`` is stored in ``store``'s scope (an id of its prefix may be gone)."""
    return bool(store.owned([item_id])) and store.get(item_id) is not None


def checked_arguments(tool: ToolSpec, given: Mapping[str, Any]) -> dict[str, Any]:
    """``given`` checked against ``tool``'s schema, with the defaults filled in.

    A ``null`` argument takes its default (models send one for an optional argument they do
    not use). Raises :class:`~agent_engine.errors.ValidationError` naming the argument.
    """
    properties: Mapping[str, Any] = tool.parameters["properties"]
    extra = sorted(set(given) - set(properties))
    if extra:
        raise ValidationError(
            f"{tool.name} takes no argument {extra[0]!r}; it takes {', '.join(properties)}",
            field=extra[0],
            value=given[extra[0]],
        )
    arguments = {**tool.defaults, **{k: v for k, v in given.items() if v is not None}}
    missing = [name for name in tool.required if name not in arguments]
    if missing:
        raise ValidationError(f"{tool.name} needs {missing[0]!r}", field=missing[0], value=None)
    for name, value in arguments.items():
        _check(tool.name, name, properties[name], value)
    return arguments


def _check(function: str, name: str, schema: Mapping[str, Any], value: Any) -> None:
    kind = schema["type"]
    wrong = not isinstance(value, _JSON_TYPES[kind]) or (
        isinstance(value, bool) and kind in ("integer", "number")
    )
    if kind == "integer" and isinstance(value, float) and value.is_integer():
        wrong = False
    problem = f"is {kind}, got {type(value).__name__}" if wrong else None
    if problem is None and "enum" in schema and value not in schema["enum"]:
        problem = f"is one of {', '.join(map(str, schema['enum']))}, got {value!r}"
    if problem is None and kind == "string" and len(value.strip()) < schema.get("minLength", 0):
        problem = "is not blank"
    if problem is None and kind in ("integer", "number"):
        low, high = schema.get("minimum"), schema.get("maximum")
        if (low is not None and value < low) or (high is not None and value > high):
            problem = f"is within [{low}, {high}], got {value!r}"
    if problem is None and kind == "array":
        if len(value) > schema.get("maxItems", len(value)):
            problem = f"holds at most {schema['maxItems']} values"
        elif any(not isinstance(v, str) or not v.strip() for v in value):
            problem = "holds non-empty strings"
    if problem is not None:
        raise ValidationError(f"{function}: {name} {problem}", field=name, value=value)


def _hit(item: ContextItem) -> dict[str, Any]:
    text = item.text if len(item.text) <= TEXT_LIMIT else item.text[:TEXT_LIMIT] + " [...]"
    hit: dict[str, Any] = {"id": item.id, "tier": item.tier.value, "kind": item.kind, "text": text}
    if item.archived:
        hit["archived"] = True
    if item.pinned:
        hit["pinned"] = True
    return hit
