"""The write path: what happens to memories on their way into the stores (``docs/ingestion.md``).

:mod:`.decide` decides which conversation turns are worth a memory at all.
"""

from __future__ import annotations

from agent_engine.ingest.decide import (
    DEFAULT_DECIDER,
    Decision,
    MemoryDecider,
    Reason,
    RuleDecider,
)

__all__ = ["DEFAULT_DECIDER", "Decision", "MemoryDecider", "Reason", "RuleDecider"]
