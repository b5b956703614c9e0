"""Adapters that put agent_engine's memory under other agent frameworks.

Each framework has a subpackage of its own (:mod:`agent_engine.integrations.langgraph`),
which imports the framework when it is imported, never before: this package holds no names,
so ``import agent_engine`` and ``import agent_engine.integrations`` load no framework.
"""

__all__: list[str] = []
