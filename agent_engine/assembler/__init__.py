"""Context assembly: page items from all tiers into a token budget, and explain the choice.

Besides what the top-level package re-exports (the assembler, its configuration and the
package it builds), this is where a custom scoring policy finds its parts: the
:class:`Candidates` a scorer sees, the :data:`Scorer` signature, and the scorers the built-in
policies are made of, to reuse with other options or sources; and the parts of a summary of
what a build left out for lack of room (:class:`SummaryConfig`, the :class:`Summarizer`
protocol, the two summarizers shipped); and the reranker stage after fusion
(:class:`RerankConfig`, the :class:`Reranker` protocol, :class:`CrossEncoderReranker`).
"""

from agent_engine.assembler.assembler import AssemblerConfig, ContextAssembler
from agent_engine.assembler.candidates import GatherLimits
from agent_engine.assembler.conflicts import MarkedConflict
from agent_engine.assembler.diversity import Diversity
from agent_engine.assembler.package import (
    ContextPackage,
    Omission,
    OmissionReason,
    Selection,
    SelectionReason,
    Summary,
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
from agent_engine.assembler.pressure import MemoryPressure, TierPressure
from agent_engine.assembler.query import (
    DEFAULT_QUERY_BUILDER,
    HistoryQuery,
    QueryBuilder,
    RewriteQuery,
)
from agent_engine.assembler.render import Layout, RenderFormat
from agent_engine.assembler.rerank import CrossEncoderReranker, RerankConfig, Reranker
from agent_engine.assembler.slo import SLOGuard, SLOPolicy, SLOStatus
from agent_engine.assembler.summary import (
    DEFAULT_SUMMARY_PROMPT,
    ExtractiveSummarizer,
    LLMSummarizer,
    Summarizer,
    SummaryConfig,
    SummaryRequest,
    SummarySource,
)

__all__ = [
    "AssemblerConfig",
    "Candidates",
    "ContextAssembler",
    "ContextPackage",
    "CrossEncoderReranker",
    "DEFAULT_POLICIES",
    "DEFAULT_QUERY_BUILDER",
    "DEFAULT_SUMMARY_PROMPT",
    "Diversity",
    "ExtractiveSummarizer",
    "FrequencyScorer",
    "GatherLimits",
    "HistoryQuery",
    "HybridScorer",
    "ImportanceScorer",
    "LLMSummarizer",
    "Layout",
    "LexicalScorer",
    "MarkedConflict",
    "MemoryPressure",
    "Omission",
    "OmissionReason",
    "Policy",
    "QueryBuilder",
    "RRFScorer",
    "RandomScorer",
    "RecencyScorer",
    "RenderFormat",
    "RerankConfig",
    "Reranker",
    "RewriteQuery",
    "SLOGuard",
    "SLOPolicy",
    "SLOStatus",
    "Scorer",
    "Selection",
    "SelectionReason",
    "SemanticScorer",
    "Summarizer",
    "Summary",
    "SummaryConfig",
    "SummaryRequest",
    "SummarySource",
    "TierFailure",
    "TierPressure",
    "TierUsage",
]
