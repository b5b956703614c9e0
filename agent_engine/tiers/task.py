"""Task memory: one task's instructions, reasoning, tool outputs and stage outputs.

Ephemeral by design (seed 002 section 2): it lives while the task runs and is cleared when the
task reaches a terminal state, or earlier when an executor knows it will not retry. Anything
worth keeping must be promoted to project memory (see :mod:`agent_engine.tiers.promotion`);
what the task used most (its promotion candidates) is reported when it ends, and can be held
for that (:mod:`agent_engine.tiers.consolidation`).

A task's memory belongs to its project and its user as well as its id
(:func:`~agent_engine.tiers.scope.task_namespace`): two projects that both run a task called
``fix-login`` each have their own.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

from agent_engine import _validate
from agent_engine._telemetry import DEFAULT_TELEMETRY, Telemetry
from agent_engine.errors import ValidationError
from agent_engine.memory.backend import MemoryBackend
from agent_engine.memory.inmemory import InMemoryBackend
from agent_engine.models import ContextItem, Task, TaskState, Tier, utcnow
from agent_engine.redaction import DEFAULT_REDACTION, RedactionPolicy
from agent_engine.tiers.aging import AgingPolicy
from agent_engine.tiers.audit import AuditLog
from agent_engine.tiers.base import TierStore
from agent_engine.tiers.conflicts import DEFAULT_DETECTION, ConflictDetection
from agent_engine.tiers.consolidation import TaskEnd, end_task
from agent_engine.tiers.dedup import MergePolicy
from agent_engine.tiers.forks import fork_scope
from agent_engine.tiers.scope import parse_task_namespace, task_namespace
from agent_engine.tiers.signals import PromotionPreset

__all__ = ["TaskMemoryStore", "task_namespace"]


def _as_text(value: Any) -> str:
    """The text of an output, after checking it can be stored (it goes in the payload too)."""
    if isinstance(value, str):
        return _validate.text("output", value)
    # The payload holds the output one level down, so it may nest one level less.
    copied = _validate.json_value("output", value, max_depth=_validate.MAX_JSON_DEPTH - 1)
    return json.dumps(copied, sort_keys=True, ensure_ascii=False)


class TaskMemoryStore(TierStore):
    """Memory of one task. Without a backend it keeps items in memory (the seed's default).

    ``task`` is a :class:`~agent_engine.models.Task` (its project and user scope the memory) or
    a task id, scoped by ``project_id`` and ``user_id`` (both ``"default"`` unless given).
    A task's memory is its timeline (what it thought and did, in order), so near-duplicates
    are not merged unless a ``merge`` policy is given: a step taken twice happened twice.
    """

    tier = Tier.TASK

    def __init__(
        self,
        task: Task | str,
        backend: MemoryBackend | None = None,
        *,
        project_id: str | None = None,
        user_id: str | None = None,
        audit: AuditLog | None = None,
        clock: Callable[[], datetime] = utcnow,
        aging: AgingPolicy | None = None,
        conflict_detection: ConflictDetection | None = DEFAULT_DETECTION,
        merge: MergePolicy | None = None,
        redaction: RedactionPolicy | None = DEFAULT_REDACTION,
        telemetry: Telemetry | None = DEFAULT_TELEMETRY,
    ) -> None:
        if isinstance(task, Task):
            if (project_id, user_id) != (None, None):
                raise ValidationError(
                    "a Task names its own project and user; pass project_id and user_id only "
                    "with a task id",
                    field="project_id" if project_id is not None else "user_id",
                    value=project_id if project_id is not None else user_id,
                )
            project_id, user_id = task.project_id, task.user_id
            task = task.id
        self.task_id = task
        self.project_id = "default" if project_id is None else project_id
        self.user_id = "default" if user_id is None else user_id
        super().__init__(
            backend if backend is not None else InMemoryBackend(),
            task_namespace(self.task_id, self.project_id, self.user_id),
            audit=audit,
            clock=clock,
            aging=aging,
            conflict_detection=conflict_detection,
            merge=merge,
            redaction=redaction,
            telemetry=telemetry,
        )

    def add_instruction(self, text: str, *, importance: float = 1.0) -> ContextItem:
        """Record the task's instructions: the start of the timeline the assembler keeps (HEAD)."""
        return self.add(
            self.new_item("instruction", text, importance=importance, tags=("task", "instruction"))
        )

    def add_reasoning(self, text: str, stage_id: str, *, importance: float = 0.5) -> ContextItem:
        """Record a reasoning step of a stage."""
        return self.add(
            self.new_item(
                "reasoning",
                text,
                importance=importance,
                tags=("task", stage_id),
                source=self._stage_source(stage_id),
                payload={"stage_id": stage_id},
            )
        )

    def add_tool_output(
        self, tool_id: str, output: Any, *, stage_id: str | None = None, importance: float = 0.7
    ) -> ContextItem:
        """Record a tool's output (any JSON value); its text is what ranking sees."""
        return self.add(
            self.new_item(
                "tool_output",
                f"{tool_id}: {_as_text(output)}",
                importance=importance,
                tags=("task", "tool", tool_id),
                source=self._stage_source(stage_id) if stage_id else None,
                payload={"tool_id": tool_id, "output": output},
            )
        )

    def add_stage_output(
        self, stage_id: str, output: Any, *, importance: float = 0.6
    ) -> ContextItem:
        """Record what a stage produced."""
        return self.add(
            self.new_item(
                "stage_output",
                _as_text(output),
                importance=importance,
                tags=("task", stage_id),
                source=self._stage_source(stage_id),
                payload={"stage_id": stage_id, "output": output},
            )
        )

    def get_stage_outputs(self, stage_id: str) -> list[ContextItem]:
        """Everything recorded for a stage, in the order it happened.

        A fork's stages include what its ancestors recorded for them before it forked: their
        items name the task that recorded them as their source.
        """
        tasks = [self.task_id]
        for fork in self.lineage():
            parsed = parse_task_namespace(fork.parent)
            if parsed is not None:
                tasks.append(parsed[2])
        sources = [f"task/{task}/{stage_id}" for task in dict.fromkeys(tasks)]
        return self.query({"source": {"$in": sources}}, limit=None, order_by="+timestamp")

    def on_state(self, state: TaskState) -> int:
        """Apply the task lifecycle: a terminal state clears the memory; returns items removed.

        Use :meth:`finish` to learn what the task's promotion candidates were.
        """
        return self.finish().removed if TaskState(state).terminal else 0

    def finish(
        self,
        *,
        into: TierStore | None = None,
        preset: PromotionPreset | str | None = None,
        hold: bool = False,
    ) -> TaskEnd:
        """End the task: clear its memory and report its promotion candidates.

        Nothing moves by default: the candidates (items accessed three times or more) are
        reported, and cleared with the rest unless ``hold`` keeps them here for an explicit
        :func:`~agent_engine.tiers.promotion.promote`. With ``preset`` and ``into`` (the
        project's store), those the preset scores high enough are first promoted into it as
        quarantined candidates. See :mod:`agent_engine.tiers.consolidation`.
        """
        return end_task(self, into=into, preset=preset, hold=hold)

    def fork(self, task: Task | str, *, checkpoint: str | None = None) -> TaskMemoryStore:
        """Start task ``task``'s memory from this task's, copy-on-write; return its store.

        ``task`` is a new task of the same project and user (a :class:`~agent_engine.Task`,
        or its id). The fork sees everything this task remembers now and nothing either task
        writes afterwards; it costs one record, however much this task holds. With
        ``checkpoint`` it starts from that checkpoint of this task instead. The fork's store
        has this store's settings. See :mod:`agent_engine.tiers.forks`.
        """
        if isinstance(task, Task) and (task.project_id, task.user_id) != (
            self.project_id,
            self.user_id,
        ):
            raise ValidationError(
                f"a fork of task {self.task_id!r} belongs to project {self.project_id!r} and "
                f"user {self.user_id!r}, not {task.project_id!r} and {task.user_id!r}",
                field="task",
                value=task.id,
            )
        child = TaskMemoryStore(
            task.id if isinstance(task, Task) else task,
            self.backend,
            project_id=self.project_id,
            user_id=self.user_id,
            **self._settings(),
        )
        return fork_scope(self, child, checkpoint=checkpoint)

    def _stage_source(self, stage_id: str) -> str:
        return f"task/{self.task_id}/{stage_id}"
