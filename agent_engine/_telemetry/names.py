"""The names our spans, attributes and metrics use: the conventions' where they have one.

The OpenTelemetry GenAI memory conventions (``gen_ai.memory.client`` spans; in development,
``open-telemetry/semantic-conventions-genai``, ``model/gen-ai/``) name memory operations
(``gen_ai.operation.name``: ``search_memory``, ``upsert_memory``, ``update_memory``, ...) and
a few attributes (``gen_ai.memory.*``). Everything they do not cover is ours, under
``agent_engine.*``: a context build is not one of their operations, and tiers, budgets and
phases are not in their vocabulary. ``docs/telemetry.md`` lists every name and whose it is.
"""

from __future__ import annotations

from typing import Final

# ---------------------------------------------------------------- the conventions' names

OPERATION_NAME: Final = "gen_ai.operation.name"
SEARCH_MEMORY: Final = "search_memory"
UPSERT_MEMORY: Final = "upsert_memory"
"""Create or update without the caller choosing which: an add may merge into a held item."""
UPDATE_MEMORY: Final = "update_memory"
STORE_ID: Final = "gen_ai.memory.store.id"
"""A store's namespace (``project:acme``, ``task:<project>:<user>:<task>``, ``global:<user>``)."""
RECORD_ID: Final = "gen_ai.memory.record.id"
RECORD_COUNT: Final = "gen_ai.memory.record.count"
QUERY_TEXT: Final = "gen_ai.memory.query.text"
"""Opt-in (``Telemetry(record_text=True)``)."""
RECORDS: Final = "gen_ai.memory.records"
"""Opt-in (``Telemetry(record_text=True)``): JSON, as the conventions' memory-records schema."""
ERROR_TYPE: Final = "error.type"

# ---------------------------------------------------------------- ours

METHOD: Final = "agent_engine.operation.name"
"""The method that ran (``add``, ``search``, ``search_text``, ``promote``, ``compact``,
``build_context``): several share one conventions' operation."""
TIER: Final = "agent_engine.memory.tier"
BUILD_SPAN: Final = "build_context"
BUILD_DURATION: Final = "agent_engine.context.build.duration"
BUDGET_UTILIZATION: Final = "agent_engine.context.budget.utilization"
TOKEN_USAGE: Final = "agent_engine.context.token.usage"  # noqa: S105 - a metric's name
ITEMS: Final = "agent_engine.context.items"
MEMORY_DURATION: Final = "agent_engine.memory.operation.duration"
