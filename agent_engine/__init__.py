"""agent_engine: tiered memory (task, project, global) and context assembly for LLM agents.

The public API is what ``__all__`` lists; everything else may change without notice.
``__version__`` is the installed distribution's version.

Importing the package stays light: the SQL backend's names (and with them SQLAlchemy and
alembic) load on first use, as ``FaissBackend`` and ``SentenceTransformerEmbedder`` import
their libraries only when one is built.
"""

import typing as _typing

from agent_engine import _lazy
from agent_engine._version import __version__
from agent_engine.assembler.allocation import allocate
from agent_engine.assembler.assembler import AssemblerConfig, ContextAssembler
from agent_engine.assembler.candidates import GatherLimits
from agent_engine.assembler.package import (
    ContextPackage,
    Omission,
    OmissionReason,
    Selection,
    SelectionReason,
    TierFailure,
    TierUsage,
)
from agent_engine.assembler.policies import (
    DEFAULT_POLICIES,
    Candidates,
    FrequencyScorer,
    HybridScorer,
    ImportanceScorer,
    LexicalScorer,
    Policy,
    RandomScorer,
    RecencyScorer,
    RRFScorer,
    Scorer,
    SemanticScorer,
)
from agent_engine.assembler.render import Layout, RenderFormat
from agent_engine.embeddings import (
    Embedder,
    EmbedderIdentity,
    HashingEmbedder,
    SentenceTransformerEmbedder,
)
from agent_engine.errors import (
    AgentEngineError,
    BackendError,
    BackendUnavailableError,
    ConfirmationDeclined,
    DimensionMismatchError,
    DuplicateItemError,
    EmbedderMismatchError,
    EmbeddingError,
    FilterError,
    FilterTooLargeError,
    IndexCorruptError,
    ItemNotFoundError,
    QueryTimeoutError,
    ReembedRequiredError,
    SchemaVersionError,
    ValidationError,
)
from agent_engine.filters import Filter, parse_filter
from agent_engine.memory.audit import AuditStore
from agent_engine.memory.backend import BaseBackend, MemoryBackend, SearchHit
from agent_engine.memory.faiss import FaissBackend
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
from agent_engine.retrieval.bm25 import LexicalIndex
from agent_engine.retrieval.fusion import minmax_fusion, rrf
from agent_engine.serde import from_dict, to_dict
from agent_engine.tiers.audit import AuditLog
from agent_engine.tiers.base import TierStore
from agent_engine.tiers.eviction import EvictionPolicy, LowestImportanceOldest
from agent_engine.tiers.global_ import Confirm, ConfirmationRequest, GlobalMemoryStore
from agent_engine.tiers.project import ProjectMemoryStore
from agent_engine.tiers.promotion import PromotionResult, promote
from agent_engine.tiers.task import TaskMemoryStore
from agent_engine.tokens import (
    DEFAULT_COUNTER,
    HeuristicTokenCounter,
    TokenCounter,
    TransformersTokenCounter,
)

if _typing.TYPE_CHECKING:
    from agent_engine.memory.sql import (
        SQLAlchemyBackend,
        database_revision,
        default_database_url,
        upgrade_database,
    )
else:
    __getattr__, __dir__ = _lazy.on_first_use(
        globals(),
        dict.fromkeys(
            ["SQLAlchemyBackend", "database_revision", "default_database_url", "upgrade_database"],
            "agent_engine.memory.sql",
        ),
    )

__all__ = [
    "AgentEngineError",
    "AssemblerConfig",
    "AuditAction",
    "AuditEvent",
    "AuditLog",
    "AuditStore",
    "BackendError",
    "BackendUnavailableError",
    "BaseBackend",
    "Candidates",
    "Confirm",
    "ConfirmationDeclined",
    "ConfirmationRequest",
    "ContextAssembler",
    "ContextItem",
    "ContextPackage",
    "ContextRequest",
    "DEFAULT_COUNTER",
    "DEFAULT_POLICIES",
    "DimensionMismatchError",
    "DuplicateItemError",
    "Embedder",
    "EmbedderIdentity",
    "EmbedderMismatchError",
    "EmbeddingError",
    "EvictionPolicy",
    "FaissBackend",
    "Filter",
    "FilterError",
    "FilterTooLargeError",
    "FrequencyScorer",
    "GatherLimits",
    "GlobalMemoryStore",
    "HashingEmbedder",
    "HeuristicTokenCounter",
    "HybridScorer",
    "ImportanceScorer",
    "InMemoryBackend",
    "IndexCorruptError",
    "ItemNotFoundError",
    "Layout",
    "LexicalIndex",
    "LexicalScorer",
    "LowestImportanceOldest",
    "MemoryBackend",
    "Omission",
    "OmissionReason",
    "Policy",
    "ProjectMemoryStore",
    "PromotionResult",
    "Provenance",
    "QueryTimeoutError",
    "RRFScorer",
    "RandomScorer",
    "RecencyScorer",
    "ReembedRequiredError",
    "RenderFormat",
    "SQLAlchemyBackend",
    "SchemaVersionError",
    "Scorer",
    "SearchHit",
    "Selection",
    "SelectionReason",
    "SemanticScorer",
    "SentenceTransformerEmbedder",
    "Status",
    "Task",
    "TaskMemoryStore",
    "TaskState",
    "Tier",
    "TierFailure",
    "TierShares",
    "TierStore",
    "TierUsage",
    "TokenCounter",
    "TransformersTokenCounter",
    "ValidationError",
    "__version__",
    "allocate",
    "database_revision",
    "default_database_url",
    "from_dict",
    "minmax_fusion",
    "parse_filter",
    "promote",
    "rrf",
    "to_dict",
    "upgrade_database",
]
