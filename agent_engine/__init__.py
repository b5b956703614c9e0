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
from agent_engine.memory.backend import BaseBackend, Capabilities, MemoryBackend, SearchHit
from agent_engine.memory.inmemory import InMemoryBackend
from agent_engine.models import (
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

__all__ = [
    "AgentEngineError",
    "BackendError",
    "BackendUnavailableError",
    "BaseBackend",
    "Capabilities",
    "ConfirmationDeclined",
    "ContextItem",
    "ContextRequest",
    "DimensionMismatchError",
    "DuplicateItemError",
    "Embedder",
    "EmbeddingError",
    "Filter",
    "FilterError",
    "HashingEmbedder",
    "InMemoryBackend",
    "IndexCorruptError",
    "ItemNotFoundError",
    "MemoryBackend",
    "Provenance",
    "SchemaVersionError",
    "SearchHit",
    "SentenceTransformerEmbedder",
    "Status",
    "Task",
    "TaskState",
    "Tier",
    "TierShares",
    "ValidationError",
    "from_dict",
    "parse_filter",
    "to_dict",
]
