"""agent_engine: tiered memory (task, project, global) and context assembly for LLM agents.

The public API is what ``__all__`` lists; everything else may change without notice.
"""

from agent_engine.embeddings import Embedder, HashingEmbedder, SentenceTransformerEmbedder
from agent_engine.errors import (
    AgentEngineError,
    BackendError,
    BackendUnavailableError,
    ConfirmationDeclined,
    DimensionMismatchError,
    DuplicateItemError,
    EmbeddingError,
    FilterError,
    IndexCorruptError,
    ItemNotFoundError,
    SchemaVersionError,
    ValidationError,
)
from agent_engine.filters import Filter, parse_filter
from agent_engine.memory.audit import AuditStore
from agent_engine.memory.backend import BaseBackend, Capabilities, MemoryBackend, SearchHit
from agent_engine.memory.inmemory import InMemoryBackend
from agent_engine.models import (
    AuditAction,
    AuditEvent,
    ContextItem,
    ContextRequest,
    Provenance,
    Status,
    Task,
    TaskState,
    Tier,
    TierShares,
)
from agent_engine.serde import from_dict, to_dict
from agent_engine.tiers.audit import AuditLog
from agent_engine.tiers.base import TierStore
from agent_engine.tiers.eviction import EvictionPolicy, LowestImportanceOldest
from agent_engine.tiers.global_ import Confirm, ConfirmationRequest, GlobalMemoryStore
from agent_engine.tiers.project import ProjectMemoryStore
from agent_engine.tiers.promotion import PromotionResult, promote
from agent_engine.tiers.task import TaskMemoryStore

__all__ = [
    "AgentEngineError",
    "AuditAction",
    "AuditEvent",
    "AuditLog",
    "AuditStore",
    "BackendError",
    "BackendUnavailableError",
    "BaseBackend",
    "Capabilities",
    "Confirm",
    "ConfirmationDeclined",
    "ConfirmationRequest",
    "ContextItem",
    "ContextRequest",
    "DimensionMismatchError",
    "DuplicateItemError",
    "Embedder",
    "EmbeddingError",
    "EvictionPolicy",
    "Filter",
    "FilterError",
    "GlobalMemoryStore",
    "HashingEmbedder",
    "InMemoryBackend",
    "IndexCorruptError",
    "ItemNotFoundError",
    "LowestImportanceOldest",
    "MemoryBackend",
    "ProjectMemoryStore",
    "PromotionResult",
    "Provenance",
    "SchemaVersionError",
    "SearchHit",
    "SentenceTransformerEmbedder",
    "Status",
    "Task",
    "TaskMemoryStore",
    "TaskState",
    "Tier",
    "TierShares",
    "TierStore",
    "ValidationError",
    "from_dict",
    "parse_filter",
    "promote",
    "to_dict",
]
