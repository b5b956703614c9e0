"""The stores an assembler reads: who opens a task's, a session's, a project's and a user's memory.

An assembler reads three tiers for every step (four when the task runs in a session), and an
application writes to the same stores between steps. One object opens them all, on first use,
over the backends each tier lives on, with the tiers' own settings (the project item limit, the
global confirmation callback, the clock their timestamps come from, the auto-promotion preset
when one is chosen), and keeps them, so the assembler and the application share one store per
scope: an eviction limit or a confirmation callback applies whichever of them writes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

import attrs

from agent_engine import _validate
from agent_engine._telemetry import DEFAULT_TELEMETRY, Telemetry
from agent_engine.memory.backend import MemoryBackend
from agent_engine.memory.inmemory import InMemoryBackend
from agent_engine.models import Task, Tier, utcnow
from agent_engine.redaction import DEFAULT_REDACTION, RedactionPolicy
from agent_engine.tiers.aging import AgingPolicy
from agent_engine.tiers.base import TierStore
from agent_engine.tiers.conflicts import DEFAULT_DETECTION, ConflictDetection
from agent_engine.tiers.consolidation import TaskEnd
from agent_engine.tiers.dedup import DEFAULT_MERGE, MergePolicy
from agent_engine.tiers.global_ import Confirm, GlobalMemoryStore
from agent_engine.tiers.project import ProjectMemoryStore
from agent_engine.tiers.quarantine import DEFAULT_WINDOW, check_window, confirm_candidates
from agent_engine.tiers.scope import session_namespace
from agent_engine.tiers.session import (
    SessionEnd,
    SessionMemoryStore,
    SessionSummarizer,
    extractive_digest,
)
from agent_engine.tiers.signals import PromotionPreset, resolve_preset
from agent_engine.tiers.task import TaskMemoryStore, task_namespace

__all__ = ["MemoryStores"]


class MemoryStores:
    """Opens and keeps the task, project and global stores of an application.

    Give one ``backend`` for every tier, or one per tier. Without ``task_backend``, task memory
    goes to ``backend`` when one is given, else to a fresh in-memory backend (task memory is
    ephemeral); session memory, which outlives a task and is shared by processes, goes where
    project memory goes unless ``session_backend`` says. ``max_project_items`` bounds each
    project's memory (``None``: unbounded);
    ``confirm`` is asked before a high-risk write to global memory; ``clock`` stamps what the
    stores write; ``aging`` is the policy each store's ``compact()`` applies (a project's
    soft limit is still ``max_project_items``); ``conflict_detection`` bounds the search for
    contradictions on every store's writes (``None``: none); ``merge`` says when an item added
    to project or global memory is a near-duplicate merged into one held (``None``: never;
    task memory keeps every step of its timeline); ``redaction`` is what every store takes out
    of an item before writing it (:class:`~agent_engine.redaction.RedactionPolicy`: secrets
    and personal data masked by default; ``None``: items are stored as given); ``telemetry``
    is where every store, and an assembler's builds over these stores, report as OpenTelemetry
    spans and metrics (:class:`~agent_engine.Telemetry`: the application's global providers,
    no text; ``None``: nothing; ``docs/telemetry.md``).

    ``promotion`` turns auto-promotion on (off by default): a preset's name
    (``"conservative"``, ``"balanced"``, ``"aggressive"``) or a
    :class:`~agent_engine.tiers.signals.PromotionPreset`. Then every task end promotes the
    task's items the preset scores high enough into its project as quarantined candidates,
    after running the confirmation step on the project's earlier ones, whose quarantine lasts
    ``candidate_window`` (24 hours). ``hold_candidates`` keeps a task's other promotion
    candidates in its memory when it ends, for someone to promote or dismiss (by default
    they are reported and cleared with the rest). A bad preset or window raises
    :class:`~agent_engine.errors.ValidationError` here, before any store opens.
    """

    def __init__(
        self,
        backend: MemoryBackend | None = None,
        *,
        task_backend: MemoryBackend | None = None,
        session_backend: MemoryBackend | None = None,
        project_backend: MemoryBackend | None = None,
        global_backend: MemoryBackend | None = None,
        max_project_items: int | None = 1000,
        confirm: Confirm | None = None,
        clock: Callable[[], datetime] = utcnow,
        promotion: PromotionPreset | str | None = None,
        candidate_window: timedelta = DEFAULT_WINDOW,
        hold_candidates: bool = False,
        aging: AgingPolicy | None = None,
        conflict_detection: ConflictDetection | None = DEFAULT_DETECTION,
        merge: MergePolicy | None = DEFAULT_MERGE,
        redaction: RedactionPolicy | None = DEFAULT_REDACTION,
        telemetry: Telemetry | None = DEFAULT_TELEMETRY,
    ) -> None:
        self.promotion = resolve_preset(promotion) if promotion is not None else None
        self.candidate_window = check_window(candidate_window)
        self.hold_candidates = hold_candidates
        shared = backend if backend is not None else InMemoryBackend()
        self.backends: Mapping[Tier, MemoryBackend] = {
            Tier.TASK: task_backend or backend or InMemoryBackend(),
            Tier.SESSION: session_backend or project_backend or shared,
            Tier.PROJECT: project_backend or shared,
            Tier.GLOBAL: global_backend or shared,
        }
        self.max_project_items = max_project_items
        self.confirm = confirm
        self.clock = clock
        self.aging = aging
        self.conflict_detection = conflict_detection
        self.merge = _validate.optional("merge", MergePolicy, merge)
        self.redaction = _validate.optional("redaction", RedactionPolicy, redaction)
        self.telemetry = _validate.optional("telemetry", Telemetry, telemetry)
        self._tasks: dict[str, TaskMemoryStore] = {}
        self._sessions: dict[str, SessionMemoryStore] = {}
        self._projects: dict[str, ProjectMemoryStore] = {}
        self._globals: dict[str, GlobalMemoryStore] = {}
        self._lock = threading.Lock()

    def task_store(self, task: Task | str) -> TaskMemoryStore:
        """The memory of a task (opened on first use).

        A :class:`~agent_engine.models.Task` scopes it by its project and user; a bare task id
        means the default project and user.
        """
        key = _task_key(task)
        with self._lock:
            store = self._tasks.get(key)
            if store is None:
                store = self._tasks[key] = self._open_task(task)
            return store

    def project_store(self, project_id: str) -> ProjectMemoryStore:
        """The memory of a project (opened on first use)."""
        with self._lock:
            store = self._projects.get(project_id)
            if store is None:
                store = self._projects[project_id] = ProjectMemoryStore(
                    project_id,
                    self.backends[Tier.PROJECT],
                    max_items=self.max_project_items,
                    **self._settings(),
                )
            return store

    def global_store(self, user_id: str = "default") -> GlobalMemoryStore:
        """A user's global memory (opened on first use, with the confirmation callback)."""
        with self._lock:
            store = self._globals.get(user_id)
            if store is None:
                store = self._globals[user_id] = GlobalMemoryStore(
                    self.backends[Tier.GLOBAL],
                    user_id,
                    confirm=self.confirm,
                    **self._settings(),
                )
            return store

    def session_store(
        self, session_id: str, project_id: str = "default", user_id: str = "default"
    ) -> SessionMemoryStore:
        """The memory of a session of a project and user (opened on first use)."""
        key = session_namespace(session_id, project_id, user_id)
        with self._lock:
            store = self._sessions.get(key)
            if store is None:
                store = self._sessions[key] = self._open_session(session_id, project_id, user_id)
            return store

    def session_of(self, task: Task) -> SessionMemoryStore | None:
        """The memory of the session ``task`` runs in; ``None`` when it runs in none."""
        if task.session_id is None:
            return None
        return self.session_store(task.session_id, task.project_id, task.user_id)

    def for_task(self, task: Task) -> dict[Tier, TierStore]:
        """The stores a step of ``task`` reads: its own, its session's, its project's, its user's.

        A task that runs in no session reads no session store.
        """
        session = self.session_of(task)
        return {
            Tier.TASK: self.task_store(task),
            **({} if session is None else {Tier.SESSION: session}),
            Tier.PROJECT: self.project_store(task.project_id),
            Tier.GLOBAL: self.global_store(task.user_id),
        }

    def finish_session(
        self,
        session_id: str,
        project_id: str = "default",
        user_id: str = "default",
        *,
        summarizer: SessionSummarizer | None = extractive_digest,
    ) -> SessionEnd:
        """Finalise a session and forget its store; say what became of it.

        Its summary is kept in the project as a ``session_summary`` candidate; its promotion
        candidates are reported (held with ``hold_candidates``) and, with a ``promotion``
        preset, the confirmation step runs on the project's candidates and the qualifying
        ones are promoted into the project (:meth:`SessionMemoryStore.finish`).
        """
        key = session_namespace(session_id, project_id, user_id)
        with self._lock:
            store = self._sessions.pop(key, None)
        memory = store or self._open_session(session_id, project_id, user_id)
        return memory.finish(
            into=self.project_store(project_id),
            preset=self.promotion,
            hold=self.hold_candidates,
            summarizer=summarizer,
            review=self.candidate_window,
        )

    def finish_task(self, task: Task | str) -> TaskEnd:
        """Clear a finished task's memory and forget its store; say what became of it.

        Its promotion candidates are reported (and held, with ``hold_candidates``; see
        :meth:`TaskMemoryStore.finish`). With a ``promotion`` preset, the confirmation step
        runs on the project's candidates first, then the task's qualifying items are promoted
        into the project as candidates.
        """
        with self._lock:
            store = self._tasks.pop(_task_key(task), None)
        memory = store or self._open_task(task)
        hold = self.hold_candidates
        if self.promotion is None:
            return memory.finish(hold=hold)
        project = self.project_store(memory.project_id)
        review = confirm_candidates(project, window=self.candidate_window)
        end = memory.finish(into=project, preset=self.promotion, hold=hold)
        return attrs.evolve(end, review=review)

    def cleanup_task(self, task: Task | str) -> int:
        """:meth:`finish_task`, returning only how many items were removed."""
        return self.finish_task(task).removed

    def _open_task(self, task: Task | str) -> TaskMemoryStore:
        return TaskMemoryStore(
            task,
            self.backends[Tier.TASK],
            **self._settings(merge=False),
        )

    def _open_session(self, session_id: str, project_id: str, user_id: str) -> SessionMemoryStore:
        return SessionMemoryStore(
            session_id,
            self.backends[Tier.SESSION],
            project_id=project_id,
            user_id=user_id,
            **self._settings(),
        )

    def _settings(self, *, merge: bool = True) -> dict[str, Any]:
        """What every store opened here shares; task memory keeps its timeline unmerged."""
        return {
            "clock": self.clock,
            "aging": self.aging,
            "conflict_detection": self.conflict_detection,
            **({"merge": self.merge} if merge else {}),
            "redaction": self.redaction,
            "telemetry": self.telemetry,
        }


def _task_key(task: Task | str) -> str:
    """The namespace of a task's memory, as its store builds it (defaults included)."""
    if isinstance(task, Task):
        return task_namespace(task.id, task.project_id, task.user_id)
    return task_namespace(task)
