"""Storage: the backend protocol and its implementations.

The backends never import one another (``lint-imports`` checks it). The one default that
crosses them is wired here, in the package that holds them all and that Python imports before
any of its modules: a :class:`~agent_engine.memory.faiss.FaissBackend` made without a record
store keeps its items in an :class:`~agent_engine.memory.inmemory.InMemoryBackend`.
"""

from agent_engine.memory.faiss import set_default_store
from agent_engine.memory.inmemory import InMemoryBackend

set_default_store(InMemoryBackend)
