"""LangGraph: agent_engine's memory as a LangGraph store, and a node that builds contexts.

:class:`AgentEngineStore` is a LangGraph ``BaseStore`` over the tier stores: a graph's
``store.put(("project", "shop", "facts"), ...)`` writes project memory, and the assembler
builds every later context from it. :func:`context_node` (or :class:`ContextNode`) is the
node that calls ``build_context`` for a graph step. ``docs/langgraph.md`` shows a graph with
both, and how namespaces map onto scopes (:func:`scope_namespace`;
:class:`UnmappedNamespaceError` for one that maps onto none).

Importing this package imports LangGraph (the ``langgraph`` extra); nothing else of
agent_engine does.
"""

try:
    import langgraph.store.base as _langgraph_store
except ImportError as _missing:  # pragma: no cover - the extra is installed wherever tests run
    raise ImportError(
        "agent_engine.integrations.langgraph needs LangGraph: pip install 'agent-engine[langgraph]'"
    ) from _missing

from agent_engine.integrations.langgraph._namespaces import (
    UnmappedNamespaceError,
    scope_namespace,
)
from agent_engine.integrations.langgraph._node import ContextNode, context_node, step_query
from agent_engine.integrations.langgraph._store import SOURCE, AgentEngineStore

del _langgraph_store

__all__ = [
    "AgentEngineStore",
    "ContextNode",
    "SOURCE",
    "UnmappedNamespaceError",
    "context_node",
    "scope_namespace",
    "step_query",
]
