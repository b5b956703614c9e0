"""Token counting: the cached cost is the body's count, and the budget holds for real tokenizers."""

from __future__ import annotations

from datetime import UTC, datetime

import attrs

from agent_engine import (
    DEFAULT_COUNTER,
    Task,
)

NOW = datetime(2024, 3, 1, 9, tzinfo=UTC)
TASK = Task(id="t", project_id="p", user_id="u")


class TestCachedCost:
    def test_update_recounts_changed_text(self, assembler):
        """Changing an item's text through its store re-counts the cached cost."""
        project = assembler.project_store("p")
        item = project.add_pattern("Short")
        longer = attrs.evolve(item, text="Much longer text about outbox tables and retries")
        project.update(longer)
        stored = project.get(item.id)
        assert stored.token_cost == DEFAULT_COUNTER.count(stored.body)
        assert stored.token_cost > item.token_cost
