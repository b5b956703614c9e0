"""agent_engine: tiered memory (task, project, global) and context assembly for LLM agents.

The public API is what ``__all__`` lists, one line each in ``docs/api.md``; everything else
may change without notice. Writing a custom scoring policy or backend takes a few more names,
which their subpackages export: :mod:`agent_engine.assembler` (``Candidates``, ``Scorer``, the
built-in scorers), :mod:`agent_engine.memory` (``BaseBackend``, ``SearchHit``, ...),
:mod:`agent_engine.retrieval` and :mod:`agent_engine.testing` (the conformance suite).
``__version__`` is the installed distribution's version.

Importing the package stays light: the assembler's names and the SQL backend's (and with
them SQLAlchemy and alembic) load on first use, as ``FaissBackend`` and
``SentenceTransformerEmbedder`` import their libraries only when one is built. A command that
only reads memory (``agent-engine memory search``) never loads the assembler.
"""

import typing as _typing

from agent_engine import _lazy
from agent_engine._telemetry import DEFAULT_TELEMETRY, Telemetry
from agent_engine._version import __version__
from agent_engine.embeddings import (
    Embedder,
    EmbedderIdentity,
    HashingEmbedder,
    SentenceTransformerEmbedder,
)
from agent_engine.errors import (
    AccessDeniedError,
    AgentEngineError,
    BackendError,
    BackendUnavailableError,
    CheckpointNotFoundError,
    ConfirmationDeclined,
    ConflictNotFoundError,
    CopyIncompleteError,
    DimensionMismatchError,
    DuplicateItemError,
    EmbedderMismatchError,
    EmbeddingError,
    ExportFileError,
    ExtractionError,
    FilterError,
    FilterTooLargeError,
    IndexCorruptError,
    ItemNotFoundError,
    LifecycleStateError,
    QueryTimeoutError,
    ReembedRequiredError,
    SchemaVersionError,
    StoreNotEmptyError,
    SummaryError,
    UnknownAgentError,
    UnknownBackendError,
    ValidationError,
)
from agent_engine.filters import Filter, parse_filter
from agent_engine.memory.backend import MemoryBackend
from agent_engine.memory.conflicts import Conflict, ConflictType
from agent_engine.memory.faiss import FaissBackend
from agent_engine.memory.inmemory import InMemoryBackend
from agent_engine.models import (
    ArchiveReason,
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
from agent_engine.redaction import RedactionMode, RedactionPolicy
from agent_engine.serde import from_dict, to_dict
from agent_engine.tiers.aging import AgingPolicy, CompactionReport
from agent_engine.tiers.audit import AuditLog
from agent_engine.tiers.base import TierStore
from agent_engine.tiers.conflicts import ConflictDetection
from agent_engine.tiers.consolidation import PromotionCandidate, TaskEnd, promotion_candidates
from agent_engine.tiers.dedup import AddOutcome, MergePolicy
from agent_engine.tiers.eviction import EvictionPolicy, LowestImportanceOldest
from agent_engine.tiers.global_ import Confirm, ConfirmationRequest, GlobalMemoryStore
from agent_engine.tiers.pools import PoolMemoryStore, Pools
from agent_engine.tiers.project import ProjectMemoryStore
from agent_engine.tiers.promotion import PromotionResult, promote
from agent_engine.tiers.quarantine import CandidateReview, confirm_candidates
from agent_engine.tiers.session import SessionEnd, SessionMemoryStore
from agent_engine.tiers.signals import PromotionPreset
from agent_engine.tiers.stores import MemoryStores
from agent_engine.tiers.task import TaskMemoryStore
from agent_engine.tiers.views import View
from agent_engine.tokens import (
    DEFAULT_COUNTER,
    HeuristicTokenCounter,
    TokenCounter,
    TransformersTokenCounter,
)

_MOVED = {
    **dict.fromkeys(
        [
            "Candidates",
            "FrequencyScorer",
            "HybridScorer",
            "ImportanceScorer",
            "LexicalScorer",
            "RRFScorer",
            "RandomScorer",
            "RecencyScorer",
            "Scorer",
            "SemanticScorer",
        ],
        "agent_engine.assembler",
    ),
    "allocate": "agent_engine.assembler.allocation",
    **dict.fromkeys(["AuditStore", "BaseBackend", "SearchHit"], "agent_engine.memory"),
    **dict.fromkeys(["LexicalIndex", "minmax_fusion", "rrf"], "agent_engine.retrieval"),
}
"""Names exported here up to 0.1.0, and the modules that export them now (``docs/api.md``).

For one release they still resolve, with a DeprecationWarning naming the new import path.
"""

if _typing.TYPE_CHECKING:
    from agent_engine.assembler import (
        DEFAULT_POLICIES,
        AssemblerConfig,
        ContextAssembler,
        ContextPackage,
        GatherLimits,
        Layout,
        MarkedConflict,
        Omission,
        OmissionReason,
        Policy,
        RenderFormat,
        Selection,
        SelectionReason,
        TierFailure,
        TierUsage,
    )
    from agent_engine.memory.sql import (
        SQLAlchemyBackend,
        database_revision,
        default_database_url,
        upgrade_database,
    )
else:
    __getattr__, __dir__ = _lazy.on_first_use(
        globals(),
        {
            **dict.fromkeys(
                [
                    "DEFAULT_POLICIES",
                    "DEFAULT_TELEMETRY",
                    "AssemblerConfig",
                    "ContextAssembler",
                    "ContextPackage",
                    "GatherLimits",
                    "Layout",
                    "MarkedConflict",
                    "Omission",
                    "OmissionReason",
                    "Policy",
                    "RenderFormat",
                    "Selection",
                    "SelectionReason",
                    "TierFailure",
                    "TierUsage",
                ],
                "agent_engine.assembler",
            ),
            **dict.fromkeys(
                [
                    "SQLAlchemyBackend",
                    "database_revision",
                    "default_database_url",
                    "upgrade_database",
                ],
                "agent_engine.memory.sql",
            ),
        },
        moved=_MOVED,
    )

__all__ = [
    "AccessDeniedError",
    "AddOutcome",
    "AgentEngineError",
    "AgingPolicy",
    "ArchiveReason",
    "AssemblerConfig",
    "AuditAction",
    "AuditEvent",
    "AuditLog",
    "BackendError",
    "BackendUnavailableError",
    "CandidateReview",
    "CheckpointNotFoundError",
    "CompactionReport",
    "Confirm",
    "ConfirmationDeclined",
    "ConfirmationRequest",
    "Conflict",
    "ConflictDetection",
    "ConflictNotFoundError",
    "ConflictType",
    "ContextAssembler",
    "ContextItem",
    "ContextPackage",
    "ContextRequest",
    "CopyIncompleteError",
    "DEFAULT_COUNTER",
    "DEFAULT_POLICIES",
    "DEFAULT_TELEMETRY",
    "DimensionMismatchError",
    "DuplicateItemError",
    "Embedder",
    "EmbedderIdentity",
    "EmbedderMismatchError",
    "EmbeddingError",
    "EvictionPolicy",
    "ExportFileError",
    "ExtractionError",
    "FaissBackend",
    "Filter",
    "FilterError",
    "FilterTooLargeError",
    "GatherLimits",
    "GlobalMemoryStore",
    "HashingEmbedder",
    "HeuristicTokenCounter",
    "InMemoryBackend",
    "IndexCorruptError",
    "ItemNotFoundError",
    "Layout",
    "LifecycleStateError",
    "LowestImportanceOldest",
    "MarkedConflict",
    "MemoryBackend",
    "MemoryStores",
    "MergePolicy",
    "Omission",
    "OmissionReason",
    "Policy",
    "PoolMemoryStore",
    "Pools",
    "ProjectMemoryStore",
    "PromotionCandidate",
    "PromotionPreset",
    "PromotionResult",
    "Provenance",
    "QueryTimeoutError",
    "RedactionMode",
    "RedactionPolicy",
    "ReembedRequiredError",
    "RenderFormat",
    "SQLAlchemyBackend",
    "SchemaVersionError",
    "Selection",
    "SelectionReason",
    "SentenceTransformerEmbedder",
    "SessionEnd",
    "SessionMemoryStore",
    "Status",
    "StoreNotEmptyError",
    "SummaryError",
    "Task",
    "TaskEnd",
    "TaskMemoryStore",
    "TaskState",
    "Telemetry",
    "Tier",
    "TierFailure",
    "TierShares",
    "TierStore",
    "TierUsage",
    "TokenCounter",
    "TransformersTokenCounter",
    "UnknownAgentError",
    "UnknownBackendError",
    "ValidationError",
    "View",
    "__version__",
    "confirm_candidates",
    "database_revision",
    "default_database_url",
    "from_dict",
    "parse_filter",
    "promote",
    "promotion_candidates",
    "to_dict",
    "upgrade_database",
]
