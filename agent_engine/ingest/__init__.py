"""The write path: what happens to memories on their way into the stores (``docs/ingestion.md``).

:mod:`.decide` decides which conversation turns are worth a memory at all; :mod:`.events`
is what the durable queue of :mod:`.queue` carries, and :mod:`.worker` stores it in batches;
:mod:`.extract` turns a conversation's turns into the memories in them.
"""

from __future__ import annotations

from agent_engine.errors import ExtractionError
from agent_engine.ingest.decide import (
    DEFAULT_DECIDER,
    Decision,
    MemoryDecider,
    Reason,
    RuleDecider,
    decide_safely,
)
from agent_engine.ingest.events import EVENT_FIELDS, IngestEvent
from agent_engine.ingest.extract import (
    DEFAULT_EXTRACTOR,
    TURN_KINDS,
    Extracted,
    ExtractionHook,
    ExtractionReport,
    Extractor,
    LLMExtractor,
    MemoryKind,
    RuleExtractor,
)
from agent_engine.ingest.queue import BackfillReport, Enqueued, IngestQueue, check_events
from agent_engine.ingest.worker import Backoff, IngestReport, IngestWorker
from agent_engine.memory.queue import DeadLetter, QueueCounts

__all__ = [
    "BackfillReport",
    "Backoff",
    "DEFAULT_DECIDER",
    "DEFAULT_EXTRACTOR",
    "DeadLetter",
    "Decision",
    "EVENT_FIELDS",
    "Enqueued",
    "Extracted",
    "ExtractionError",
    "ExtractionHook",
    "ExtractionReport",
    "Extractor",
    "IngestEvent",
    "IngestQueue",
    "IngestReport",
    "IngestWorker",
    "LLMExtractor",
    "MemoryDecider",
    "MemoryKind",
    "QueueCounts",
    "Reason",
    "RuleDecider",
    "RuleExtractor",
    "TURN_KINDS",
    "check_events",
    "decide_safely",
]
