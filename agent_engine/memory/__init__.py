"""Storage: the backend protocol and its implementations.

Besides the backends the top-level package re-exports, this is where a custom backend finds
its parts: :class:`BaseBackend` to subclass, the :class:`Written` and :class:`SearchHit`
values its primitives and searches return, the journal it keeps
(:class:`AuditStore`, :class:`InMemoryAuditStore`), the conflicts it keeps beside its items
(:class:`ConflictStore`, :class:`InMemoryConflictStore`), the aliases users edit
(:class:`AliasStore`, :class:`InMemoryAliasStore`), the checkpoints it saves
(:class:`CheckpointStore`, :class:`InMemoryCheckpointStore`, :class:`Checkpoint`), the agents
and pool grants it keeps (:class:`GrantStore`, :class:`InMemoryGrantStore`, :class:`Grant`,
:class:`Access`), the forks of its scopes (:class:`LineageStore`,
:class:`InMemoryLineageStore`, :class:`Fork`), and the registry it joins
(:func:`register_backend`) so the CLI opens it by URL and the cost benchmark measures it.
The conformance suite that checks it is
:class:`agent_engine.testing.BackendConformance`. ``SQLAlchemyBackend`` and ``RedisBackend``
load on first use, so importing this package leaves SQLAlchemy and the Redis client unloaded.

The backends never import one another (``lint-imports`` checks it). The one default that
crosses them is wired here, in the package that holds them all and that Python imports before
any of its modules: a :class:`~agent_engine.memory.faiss.FaissBackend` made without a record
store keeps its items in an :class:`~agent_engine.memory.inmemory.InMemoryBackend`.
"""

import typing as _typing

from agent_engine import _lazy
from agent_engine.memory.aliases import AliasStore, InMemoryAliasStore
from agent_engine.memory.audit import AuditStore, InMemoryAuditStore
from agent_engine.memory.backend import (
    AsyncReads,
    BaseBackend,
    MemoryBackend,
    ScopeVersions,
    SearchHit,
    Written,
)
from agent_engine.memory.checkpoints import Checkpoint, CheckpointStore, InMemoryCheckpointStore
from agent_engine.memory.conflicts import (
    Conflict,
    ConflictStore,
    ConflictType,
    InMemoryConflictStore,
)
from agent_engine.memory.copy import COPY_BATCH, CopyReport, copy_store
from agent_engine.memory.export import (
    EXPORT_VERSION,
    ExportReport,
    ImportReport,
    RestorePlan,
    export_store,
    import_store,
    restore_plan,
    restore_scope,
)
from agent_engine.memory.faiss import FaissBackend
from agent_engine.memory.faiss import set_default_store as _set_default_store
from agent_engine.memory.grants import Access, Grant, GrantStore, InMemoryGrantStore
from agent_engine.memory.inmemory import InMemoryBackend
from agent_engine.memory.lineage import Fork, InMemoryLineageStore, LineageStore
from agent_engine.memory.registry import (
    Backend,
    Configuration,
    OpenOptions,
    backend_for_scheme,
    backends,
    get_backend,
    register_backend,
)

_set_default_store(InMemoryBackend)

if _typing.TYPE_CHECKING:
    from agent_engine.memory.redis import RedisBackend
    from agent_engine.memory.sql import SQLAlchemyBackend
else:
    __getattr__, __dir__ = _lazy.on_first_use(
        globals(),
        {
            "RedisBackend": "agent_engine.memory.redis",
            "SQLAlchemyBackend": "agent_engine.memory.sql",
        },
    )

__all__ = [
    "Access",
    "AliasStore",
    "AsyncReads",
    "AuditStore",
    "Backend",
    "BaseBackend",
    "COPY_BATCH",
    "Checkpoint",
    "CheckpointStore",
    "Configuration",
    "Conflict",
    "ConflictStore",
    "ConflictType",
    "CopyReport",
    "EXPORT_VERSION",
    "ExportReport",
    "FaissBackend",
    "Fork",
    "Grant",
    "GrantStore",
    "ImportReport",
    "InMemoryAliasStore",
    "InMemoryAuditStore",
    "InMemoryBackend",
    "InMemoryCheckpointStore",
    "InMemoryConflictStore",
    "InMemoryGrantStore",
    "InMemoryLineageStore",
    "LineageStore",
    "MemoryBackend",
    "OpenOptions",
    "RedisBackend",
    "RestorePlan",
    "SQLAlchemyBackend",
    "ScopeVersions",
    "SearchHit",
    "Written",
    "backend_for_scheme",
    "backends",
    "copy_store",
    "export_store",
    "get_backend",
    "import_store",
    "register_backend",
    "restore_plan",
    "restore_scope",
]
