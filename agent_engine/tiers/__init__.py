"""The memory tiers over any backend, promotion between them, and their audit log.

The top-level package re-exports all of it; this is the tiers' own front door for code that
imports by layer.
"""

from agent_engine.tiers.aging import AgingPolicy, CompactionMove, CompactionReport
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
from agent_engine.tiers.quarantine import (
    CandidateReview,
    confirm_candidates,
    quarantine_ends,
    review_candidates,
)
from agent_engine.tiers.scope import (
    parse_pool_namespace,
    parse_session_namespace,
    parse_task_namespace,
)
from agent_engine.tiers.session import (
    SessionEnd,
    SessionMemoryStore,
    SessionSummarizer,
    extractive_digest,
)
from agent_engine.tiers.signals import PRESETS, Evidence, PromotionPreset, Signal
from agent_engine.tiers.stores import MemoryStores
from agent_engine.tiers.task import TaskMemoryStore

__all__ = [
    "AddOutcome",
    "AgingPolicy",
    "AuditLog",
    "CandidateReview",
    "CompactionMove",
    "CompactionReport",
    "Confirm",
    "ConfirmationRequest",
    "ConflictDetection",
    "EvictionPolicy",
    "Evidence",
    "GlobalMemoryStore",
    "LowestImportanceOldest",
    "MemoryStores",
    "MergePolicy",
    "PRESETS",
    "PoolMemoryStore",
    "Pools",
    "ProjectMemoryStore",
    "PromotionCandidate",
    "PromotionPreset",
    "PromotionResult",
    "SessionEnd",
    "SessionMemoryStore",
    "SessionSummarizer",
    "Signal",
    "TaskEnd",
    "TaskMemoryStore",
    "TierStore",
    "confirm_candidates",
    "extractive_digest",
    "parse_pool_namespace",
    "parse_session_namespace",
    "parse_task_namespace",
    "promote",
    "promotion_candidates",
    "quarantine_ends",
    "review_candidates",
]
