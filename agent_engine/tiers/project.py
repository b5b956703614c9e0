"""Project memory: what a project has learned, kept for the project's life.

Decisions, conventions, failures with their lessons, patterns and project-level preferences
(seed 002 section 3). Isolated per project: one backend can hold every project, and a store
for project A never sees B. Its working set is bounded: ``max_items`` is the soft limit of its
aging policy (``docs/aging.md``), so a write that takes it over evicts down to the low mark
by the ranking compaction uses, to the archive in batched writes, never touching pinned items
and never deleting (``docs/lifecycle.md``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from agent_engine._telemetry import DEFAULT_TELEMETRY, Telemetry
from agent_engine.errors import ValidationError
from agent_engine.memory.backend import MemoryBackend
from agent_engine.models import ArchiveReason, ContextItem, Tier, utcnow
from agent_engine.redaction import DEFAULT_REDACTION, RedactionPolicy
from agent_engine.retrieval.aliases import Aliases
from agent_engine.tiers.aging import AgingPolicy, apply_plan, plan_compaction
from agent_engine.tiers.audit import AuditLog
from agent_engine.tiers.base import TierStore
from agent_engine.tiers.conflicts import DEFAULT_DETECTION, ConflictDetection
from agent_engine.tiers.dedup import DEFAULT_MERGE, MergePolicy
from agent_engine.tiers.eviction import EvictionPolicy
from agent_engine.tiers.scope import project_namespace

__all__ = ["ProjectMemoryStore", "project_namespace"]


class ProjectMemoryStore(TierStore):
    """Memory of one project; ``max_items=None`` disables eviction.

    ``max_items`` becomes the soft limit of ``aging`` (the default :class:`AgingPolicy` when
    ``None``), whose low mark keeps its share of it (90% by default): one limit, applied on
    every write (:meth:`evict`) and by :meth:`compact`. ``eviction`` replaces the choice of
    what a write evicts (say :class:`~agent_engine.tiers.eviction.LowestImportanceOldest`).
    """

    tier = Tier.PROJECT

    def __init__(
        self,
        project_id: str,
        backend: MemoryBackend,
        *,
        max_items: int | None = 1000,
        eviction: EvictionPolicy | None = None,
        aging: AgingPolicy | None = None,
        audit: AuditLog | None = None,
        clock: Callable[[], datetime] = utcnow,
        conflict_detection: ConflictDetection | None = DEFAULT_DETECTION,
        merge: MergePolicy | None = DEFAULT_MERGE,
        redaction: RedactionPolicy | None = DEFAULT_REDACTION,
        telemetry: Telemetry | None = DEFAULT_TELEMETRY,
    ) -> None:
        if max_items is not None and (isinstance(max_items, bool) or max_items < 1):
            raise ValidationError(
                f"max_items must be a positive integer or None, got {max_items!r}",
                field="max_items",
                value=max_items,
            )
        self.project_id = project_id
        self.eviction = eviction
        super().__init__(
            backend,
            project_namespace(project_id),
            audit=audit,
            clock=clock,
            aging=aging,
            conflict_detection=conflict_detection,
            merge=merge,
            redaction=redaction,
            telemetry=telemetry,
        )
        # One limit: max_items is the soft limit of the policy compaction applies too.
        self.aging = self.aging.with_limit(max_items)

    @property
    def max_items(self) -> int | None:
        """The working set's limit: its aging policy's soft limit (``None``: unbounded)."""
        return self.aging.soft_limit

    def add_decision(
        self,
        decision: str,
        *,
        tags: Iterable[str] = (),
        rationale: str = "",
        importance: float = 0.9,
    ) -> ContextItem:
        """Record a design decision (and, optionally, why it was made)."""
        text = f"{decision} (why: {rationale})" if rationale else decision
        payload = {"decision": decision, **({"rationale": rationale} if rationale else {})}
        return self.add(
            self.new_item(
                "decision", text, importance=importance, tags=("decision", *tags), payload=payload
            )
        )

    def add_convention(
        self, convention: str, scope: str = "project", *, importance: float = 0.8
    ) -> ContextItem:
        """Record a convention and what it applies to (``scope``: a language, a folder, ...)."""
        return self._add_labelled("convention", convention, importance, scope=scope)

    def add_failure(
        self,
        failure: str | Mapping[str, Any],
        lesson: str,
        *,
        tags: Iterable[str] = (),
        importance: float = 0.85,
    ) -> ContextItem:
        """Record a failure and the lesson learned from it (``failure`` may be structured)."""
        if not isinstance(failure, str | Mapping):
            raise ValidationError(
                f"failure must be a text or a mapping, got {type(failure).__name__}",
                field="failure",
                value=failure,
            )
        summary = failure if isinstance(failure, str) else str(failure.get("message", failure))
        return self.add(
            self.new_item(
                "failure",
                f"{summary} Lesson: {lesson}",
                importance=importance,
                tags=("failure", *tags),
                payload={"failure": failure, "lesson": lesson},
            )
        )

    def add_pattern(
        self, pattern: str, domain: str = "general", *, importance: float = 0.7
    ) -> ContextItem:
        """Record a reusable pattern of this project."""
        return self._add_labelled("pattern", pattern, importance, domain=domain)

    def add_preference(
        self, preference: str, category: str = "general", *, importance: float = 0.8
    ) -> ContextItem:
        """Record a preference that holds for this project only."""
        return self._add_labelled("preference", preference, importance, category=category)

    def query_decisions(
        self, tags: Iterable[str] | None = None, limit: int | None = 100
    ) -> list[ContextItem]:
        """Decisions, newest first, optionally having any of ``tags``."""
        filters: dict[str, Any] = {"kind": "decision"}
        wanted = list(tags or ())
        if wanted:
            filters["tags"] = wanted
        return self.query(filters, limit=limit)

    # ------------------------------------------------------------------ aliases

    def aliases(self) -> Aliases:
        """The project's aliases, as every build of its tasks reads them (one read)."""
        return Aliases(self.backend.aliases.of_namespace(self.namespace))

    def add_alias(self, term: str, expansions: Iterable[str]) -> tuple[str, ...]:
        """Let a query's ``term`` mean its ``expansions`` too; return all of its expansions.

        "Mel" for "Melanie Smith", "k8s" for "kubernetes": a query writing the term names
        the sources an expansion names and matches the expansions' words (what aliases do:
        :mod:`agent_engine.retrieval.aliases`). Kept with the project's memory, for every
        process; limits and checks are :mod:`agent_engine.memory.aliases`'.
        """
        result = self.backend.aliases.add(self.namespace, term, list(expansions))
        self._log.info("alias_added", term=term, expansions=len(result))
        return result

    def remove_alias(self, term: str, expansions: Iterable[str] | None = None) -> int:
        """Take ``expansions`` (``None``: all, and the term) from ``term``; return how many."""
        taken = None if expansions is None else list(expansions)
        removed = self.backend.aliases.remove(self.namespace, term, taken)
        self._log.info("alias_removed", term=term, removed=removed)
        return removed

    def evict(self) -> int:
        """Bring a working set over ``max_items`` down to its low mark; return how many moved.

        Compaction's soft limit, applied on write: the items of lowest decayed importance go
        to the archive (reason ``evicted``), sparing pinned items and items read within the
        policy's ``protect_recent``; with an ``eviction`` policy, that policy chooses instead.
        Eviction pages out of the working set, never deletes: evicted items stay searchable,
        builds page them back in when they match, and :meth:`restore` brings them back.
        """
        limit = self.max_items
        if limit is None:
            return 0
        count = self.count()
        if count <= limit:
            return 0
        if self.eviction is not None:
            victims = self.get_many(self.eviction.select(self, count, limit))
            evicted = len(
                self.archive_items(
                    [item for item in victims if item.current and not item.pinned],
                    ArchiveReason.EVICTED,
                    {"max_items": limit},
                )
            )
        else:
            plan = plan_compaction(
                self, self.aging, self.clock(), rules=False, limit_reason=ArchiveReason.EVICTED
            )
            count = plan.working
            evicted = apply_plan(self, plan).moved
        if count - evicted > limit:
            self._log.warning(
                "eviction_short",
                count=count - evicted,
                max_items=limit,
                reason="pinned and recently read items are never evicted",
            )
        else:
            self._log.info("evicted", count=evicted, max_items=limit)
        return evicted

    def _after_add(self) -> None:
        self.evict()
