"""Session memory: what one session of an agent found, between its tasks and their project.

A session is a run of an agent's work that outlives any one task and ends before the project
does: a chat with a user, a working day of a coding agent, a batch of tasks an orchestrator
runs together (seed 001 sections 2 and 4.3). Its memory holds what the session's tasks
should share but the project need not keep: the conversation's messages, findings written
along the way. A task that runs in a session (``Task(session_id=...)``) reads it at every
build, with its own share of the budget (:class:`~agent_engine.models.TierShares`).

A session is scoped like a task, by its project and user as well as its id
(:func:`~agent_engine.tiers.scope.session_namespace`), and ends like one, by being
*finalised* (:meth:`SessionMemoryStore.finish`): its promotion candidates are reported and,
under a preset, promoted into the project as quarantined candidates (the lifecycle rules of
:mod:`agent_engine.tiers.consolidation`); a short summary of what it held is made and, given
the project, kept there as a ``session_summary`` candidate, so that later sessions can read
what this one did; then its memory and its checkpoints are cleared.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Final

import attrs

from agent_engine import _validate
from agent_engine._telemetry import DEFAULT_TELEMETRY, Telemetry
from agent_engine.errors import ValidationError
from agent_engine.memory.backend import MemoryBackend
from agent_engine.memory.inmemory import InMemoryBackend
from agent_engine.models import ContextItem, Status, Tier, utcnow
from agent_engine.redaction import DEFAULT_REDACTION, RedactionPolicy
from agent_engine.tiers.aging import AgingPolicy
from agent_engine.tiers.audit import AuditLog
from agent_engine.tiers.base import TierStore
from agent_engine.tiers.conflicts import DEFAULT_DETECTION, ConflictDetection
from agent_engine.tiers.consolidation import TaskEnd, check_into, end_scope
from agent_engine.tiers.dedup import DEFAULT_MERGE, MergePolicy
from agent_engine.tiers.forks import fork_scope
from agent_engine.tiers.quarantine import confirm_candidates
from agent_engine.tiers.scope import session_namespace
from agent_engine.tiers.signals import PromotionPreset

__all__ = [
    "SUMMARY_KIND",
    "SessionEnd",
    "SessionMemoryStore",
    "SessionSummarizer",
    "extractive_digest",
    "session_namespace",
]

SUMMARY_KIND: Final = "session_summary"
"""The kind of the summary a finalised session leaves in its project."""
DIGEST_LINES: Final = 8
"""The most items :func:`extractive_digest` names."""
DIGEST_CHARACTERS: Final = 160
"""The most characters of each item :func:`extractive_digest` keeps."""

SessionSummarizer = Callable[[Sequence[ContextItem]], str]
"""Says what a session's items hold, in a few lines: items in, text out (``""``: nothing).

Any LLM client can be one (build a prompt from the items, return the answer); the default,
:func:`extractive_digest`, is offline and deterministic.
"""

_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def _first_sentence(text: str) -> str:
    sentence = _SENTENCE_END.split(" ".join(text.split()), maxsplit=1)[0]
    if len(sentence) <= DIGEST_CHARACTERS:
        return sentence
    return sentence[: DIGEST_CHARACTERS - 1].rstrip() + "…"


def extractive_digest(items: Sequence[ContextItem]) -> str:
    """The session's weightiest items, a line each: their first sentence, cut short.

    Weight is what the session's own use says: pinned first, then the more important, the
    more often read, the later. One line per distinct text; at most :data:`DIGEST_LINES`.
    """
    ranked = sorted(
        items,
        key=lambda item: (
            not item.pinned,
            -item.importance,
            -item.access_count,
            -item.timestamp.timestamp(),
        ),
    )
    lines: list[str] = []
    seen: set[str] = set()
    for item in ranked:
        if item.fingerprint in seen:
            continue
        seen.add(item.fingerprint)
        lines.append(f"- {_first_sentence(item.text)}")
        if len(lines) == DIGEST_LINES:
            break
    return "\n".join(lines)


@attrs.frozen
class SessionEnd(TaskEnd):
    """What finalising a session did: a task's end (:class:`TaskEnd`), and its summary.

    ``summary``: what the summarizer said the session held (``""``: nothing to say).
    ``summary_item``: that summary as the project keeps it, when finalising was given the
    project (``None`` otherwise, or when there was nothing to say).
    """

    summary: str = ""
    summary_item: ContextItem | None = None


class SessionMemoryStore(TierStore):
    """Memory of one session of a project and user. Without a backend it keeps items in memory.

    Near-duplicates merge as in project memory (``merge``): a session's findings are facts,
    not a timeline, and the same finding told twice is told once.
    """

    tier = Tier.SESSION

    def __init__(
        self,
        session_id: str,
        backend: MemoryBackend | None = None,
        *,
        project_id: str = "default",
        user_id: str = "default",
        audit: AuditLog | None = None,
        clock: Callable[[], datetime] = utcnow,
        aging: AgingPolicy | None = None,
        conflict_detection: ConflictDetection | None = DEFAULT_DETECTION,
        merge: MergePolicy | None = DEFAULT_MERGE,
        redaction: RedactionPolicy | None = DEFAULT_REDACTION,
        telemetry: Telemetry | None = DEFAULT_TELEMETRY,
    ) -> None:
        self.session_id = session_id
        self.project_id = project_id
        self.user_id = user_id
        super().__init__(
            backend if backend is not None else InMemoryBackend(),
            session_namespace(session_id, project_id, user_id),
            audit=audit,
            clock=clock,
            aging=aging,
            conflict_detection=conflict_detection,
            merge=merge,
            redaction=redaction,
            telemetry=telemetry,
        )

    def add_message(self, speaker: str, text: str, *, importance: float = 0.5) -> ContextItem:
        """Record a message of the session's conversation, said by ``speaker``.

        Stored as a conversation turn is: ``"<speaker>: <text>"``, the speaker as its source,
        so the prompt shows who said it (a message is rendered without a kind label).
        """
        speaker = _validate.identifier("speaker", speaker)
        return self.add(
            self.new_item(
                "message",
                f"{speaker}: {_validate.text('text', text)}",
                importance=importance,
                tags=("session", "message"),
                source=speaker,
                session=self.session_id,
            )
        )

    def add_finding(
        self,
        finding: str,
        *,
        kind: str = "finding",
        tags: Iterable[str] = (),
        importance: float = 0.6,
    ) -> ContextItem:
        """Record something the session found out, for its later tasks (and maybe its project)."""
        return self.add(
            self.new_item(
                kind,
                finding,
                importance=importance,
                tags=("session", *tags),
                session=self.session_id,
            )
        )

    def fork(self, session_id: str, *, checkpoint: str | None = None) -> SessionMemoryStore:
        """Start session ``session_id``'s memory from this session's, copy-on-write.

        The new session belongs to this one's project and user. It sees everything this
        session remembers now and nothing either writes afterwards; it costs one record,
        however much this session holds. With ``checkpoint`` it starts from that checkpoint
        of this session instead. Returns its store, with this store's settings. See
        :mod:`agent_engine.tiers.forks`.
        """
        child = SessionMemoryStore(
            session_id,
            self.backend,
            project_id=self.project_id,
            user_id=self.user_id,
            **self._settings(),
        )
        return fork_scope(self, child, checkpoint=checkpoint)

    def finish(
        self,
        *,
        into: TierStore | None = None,
        preset: PromotionPreset | str | None = None,
        hold: bool = False,
        summarizer: SessionSummarizer | None = extractive_digest,
        review: timedelta | None = None,
    ) -> SessionEnd:
        """Finalise the session: summarize it, report (and promote) its candidates, clear it.

        In this order, each step only once the one before it succeeded:

        1. the summary is made (``summarizer``; ``None``: none): one that raises, or answers
           something other than text, stops the finalisation with nothing changed;
        2. given ``into`` (the session's project store), the summary is kept there as a
           ``session_summary`` candidate, confirmed if read within its quarantine window;
        3. with ``preset`` and ``review`` (a quarantine window), the confirmation step runs
           on the project's earlier candidates (:func:`~agent_engine.tiers.quarantine.
           confirm_candidates`), as a task's end under a preset does;
        4. the candidates are reported and, with ``preset``, the qualifying ones promoted into
           ``into``; ``hold`` keeps the others in the session for review; then the session
           and its checkpoints are cleared.
        """
        if into is not None:  # before the summary is written there
            check_into(self, into)
        summary = self._summary(summarizer)
        kept = self._keep_summary(into, summary) if into is not None and summary else None
        reviewed = None
        if into is not None and preset is not None and review is not None:
            reviewed = confirm_candidates(into, window=review)
        end = end_scope(self, into=into if preset is not None else None, preset=preset, hold=hold)
        self._log.info("session_finalised", removed=end.removed, summary=bool(summary))
        ended = attrs.asdict(end, recurse=False)
        return SessionEnd(**{**ended, "review": reviewed}, summary=summary, summary_item=kept)

    def _summary(self, summarizer: SessionSummarizer | None) -> str:
        if summarizer is None:
            return ""
        items = self.query(None, limit=None, order_by="+timestamp")
        if not items:
            return ""
        said = summarizer(items)
        if not isinstance(said, str):
            raise ValidationError(
                f"a session summarizer must return text, got {type(said).__name__}",
                field="summarizer",
                value=said,
            )
        return said.strip()

    def _keep_summary(self, project: TierStore, summary: str) -> ContextItem:
        item = project.new_item(
            SUMMARY_KIND,
            summary,
            importance=0.6,
            tags=("session", SUMMARY_KIND),
            source=f"session/{self.session_id}",
            session=self.session_id,
            payload={"session_id": self.session_id, "user_id": self.user_id},
            status=Status.CANDIDATE,
        )
        return project.add(item)
