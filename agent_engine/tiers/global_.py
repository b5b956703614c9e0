"""Global memory: the user's preferences and patterns, shared by every project.

Never evicted on write: it ages (decay, time to live, staleness, a soft limit) only when
compacted on purpose (``compact()``, ``agent-engine memory compact``), and what ages out goes
to the archive, still searchable, not away. The high-risk operations of
seed 002 section 4.3 (adding or changing a preference, promoting into global memory, clearing
it) go through a confirmation callback first.

The contract: the callback receives a :class:`ConfirmationRequest` and returns ``True`` to
approve. Anything else, or no callback at all (unless the store was built with
``allow_unconfirmed=True``), raises :class:`~agent_engine.errors.ConfirmationDeclined` and
writes nothing. If the callback raises, its exception propagates and nothing is written
either: confirmation always happens before the first write.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

import attrs

from agent_engine._telemetry import DEFAULT_TELEMETRY, Telemetry
from agent_engine.errors import ConfirmationDeclined
from agent_engine.memory.backend import MemoryBackend
from agent_engine.models import ContextItem, Tier, utcnow
from agent_engine.redaction import DEFAULT_REDACTION, RedactionPolicy
from agent_engine.tiers.aging import AgingPolicy
from agent_engine.tiers.audit import AuditLog
from agent_engine.tiers.base import TierStore
from agent_engine.tiers.conflicts import DEFAULT_DETECTION, ConflictDetection
from agent_engine.tiers.dedup import DEFAULT_MERGE, MergePolicy
from agent_engine.tiers.scope import global_namespace

__all__ = ["Confirm", "ConfirmationRequest", "GlobalMemoryStore", "global_namespace"]

HIGH_RISK_KINDS = frozenset({"preference"})
"""Kinds whose addition or change needs confirmation."""


@attrs.frozen
class ConfirmationRequest:
    """What the callback is asked to approve: the operation, a sentence for a human, the items."""

    operation: str
    message: str
    items: tuple[ContextItem, ...] = ()


Confirm = Callable[[ConfirmationRequest], bool]
"""A confirmation callback: return ``True`` to approve the write."""


class GlobalMemoryStore(TierStore):
    """A user's cross-project memory, with confirmation of high-risk writes."""

    tier = Tier.GLOBAL

    def __init__(
        self,
        backend: MemoryBackend,
        user_id: str = "default",
        *,
        confirm: Confirm | None = None,
        allow_unconfirmed: bool = False,
        audit: AuditLog | None = None,
        clock: Callable[[], datetime] = utcnow,
        aging: AgingPolicy | None = None,
        conflict_detection: ConflictDetection | None = DEFAULT_DETECTION,
        merge: MergePolicy | None = DEFAULT_MERGE,
        redaction: RedactionPolicy | None = DEFAULT_REDACTION,
        telemetry: Telemetry | None = DEFAULT_TELEMETRY,
    ) -> None:
        self.user_id = user_id
        self.confirm = confirm
        self.allow_unconfirmed = allow_unconfirmed
        super().__init__(
            backend,
            global_namespace(user_id),
            audit=audit,
            clock=clock,
            aging=aging,
            conflict_detection=conflict_detection,
            merge=merge,
            redaction=redaction,
            telemetry=telemetry,
        )

    # ------------------------------------------------------------------ confirmation

    def confirm_or_raise(
        self, operation: str, message: str, items: Iterable[ContextItem] = ()
    ) -> None:
        """Ask the callback; raise ConfirmationDeclined unless it approves."""
        request = ConfirmationRequest(operation, message, tuple(items))
        if self.confirm is None:
            if self.allow_unconfirmed:
                return
            raise ConfirmationDeclined(
                operation,
                f"{operation} needs confirmation and this store has no callback; pass "
                "confirm=... (or allow_unconfirmed=True to accept such writes unasked)",
            )
        if self.confirm(request) is not True:
            self._log.info("confirmation_declined", operation=operation)
            raise ConfirmationDeclined(operation)

    def confirm_promotion(self, item: ContextItem, source_namespace: str, *, boost: bool) -> None:
        """A promotion into global memory (or a boost of its copy here) is confirmed first."""
        verb = "Boost existing" if boost else "Promote"
        self.confirm_or_raise(
            "promote_to_global",
            f"{verb} global memory: {item.text!r} (from {source_namespace})?",
            (item,),
        )

    # ------------------------------------------------------------------ typed helpers

    def add_preference(
        self, preference: str, category: str = "general", *, importance: float = 0.9
    ) -> ContextItem:
        """Add a user preference (high-risk: confirmed first)."""
        return self._add_labelled("preference", preference, importance, category=category)

    def add_pattern(
        self, pattern: str, domain: str = "general", *, importance: float = 0.7
    ) -> ContextItem:
        """Add a reusable cross-project pattern (low-risk: no confirmation)."""
        return self._add_labelled("pattern", pattern, importance, domain=domain)

    def query_preferences(
        self, category: str | None = None, limit: int | None = 100
    ) -> list[ContextItem]:
        """Preferences, newest first, optionally of one category."""
        filters: dict[str, Any] = {"kind": "preference"}
        if category:
            filters["tags"] = category
        return self.query(filters, limit=limit)

    # ------------------------------------------------------------------ guarded writes

    def _before_add(self, batch: list[ContextItem]) -> None:
        """Preferences among an add's items are confirmed first, as one request.

        The request shows the items as they would be stored (redacted): the callback, and
        anything it logs, never sees what redaction takes out. A preference merged into one
        held is confirmed too: it changes what memory says the user prefers (how strongly).
        """
        risky = [item for item in batch if item.kind in HIGH_RISK_KINDS]
        if risky:
            texts = "; ".join(item.text for item in risky)
            self.confirm_or_raise("add_preference", f"Add global preference(s): {texts}?", risky)

    def _before_update(self, current: ContextItem, item: ContextItem) -> None:
        """Changing a preference is confirmed first, shown as it would be stored."""
        if HIGH_RISK_KINDS & {item.kind, current.kind}:
            self.confirm_or_raise(
                "update_preference",
                f"Change global preference {current.text!r} to {item.text!r}?",
                (item,),
            )

    def clear(self) -> int:
        """Clear all of this user's global memory (high-risk: confirmed first)."""
        self.confirm_or_raise(
            "clear_global",
            f"DANGER: clear ALL global memory of user {self.user_id!r}? This cannot be undone.",
        )
        return super().clear()
