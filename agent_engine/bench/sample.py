"""The demo's sample project: what ``agent-engine demo`` runs, and the prefix part measures.

The sample (``data/sample_project.json``, invented for the demo) is Ledgerline, an invoicing
service with three past working sessions of decisions, conventions, failures with their
lessons and patterns, a user's global preferences, and a task in steps. It lives beside the
benchmark suite, below the command line, so the suite measures the same task the demo shows.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from importlib import resources
from typing import Any

import attrs

from agent_engine.models import ContextItem, Task
from agent_engine.tiers.base import TierStore
from agent_engine.tiers.global_ import GlobalMemoryStore
from agent_engine.tiers.project import ProjectMemoryStore

__all__ = ["SampleProject", "Step", "ingest"]

_KIND_IMPORTANCE = {
    "decision": 0.9,
    "convention": 0.8,
    "failure": 0.85,
    "pattern": 0.7,
    "preference": 0.8,
}


@attrs.frozen
class Step:
    """One step of the sample task: what it is about, and what it did."""

    stage: str
    query: str
    reasoning: str
    tool: str
    output: Any


@attrs.frozen
class SampleProject:
    """The bundled sample: past sessions, global memories and a task to run."""

    project: str
    user: str
    sessions: tuple[Mapping[str, Any], ...]
    global_items: tuple[Mapping[str, Any], ...]
    task: Task
    steps: tuple[Step, ...]
    lesson: str

    @classmethod
    def load(cls) -> SampleProject:
        """Read the sample shipped with the package."""
        path = resources.files("agent_engine.bench").joinpath("data", "sample_project.json")
        data = json.loads(path.read_text(encoding="utf-8"))
        task = data["task"]
        return cls(
            project=data["project"],
            user=data["user"],
            sessions=tuple(data["sessions"]),
            global_items=tuple(data["global"]),
            task=Task(
                id=task["id"],
                project_id=data["project"],
                user_id=data["user"],
                description=task["description"],
            ),
            steps=tuple(Step(**step) for step in task["steps"]),
            lesson=task["lesson"],
        )

    @property
    def item_count(self) -> int:
        """Memories the sample ingests."""
        return sum(len(s["items"]) for s in self.sessions) + len(self.global_items)


def _item(store: TierStore, spec: Mapping[str, Any], **fields: Any) -> ContextItem:
    """An item built the way the tier stores' typed helpers build it, at a past time."""
    kind = spec["kind"]
    extra = list(spec.get("tags", ()))
    payload: dict[str, Any]
    if kind == "failure":
        text = f"{spec['failure']} Lesson: {spec['lesson']}"
        payload = {"failure": spec["failure"], "lesson": spec["lesson"]}
    elif kind == "decision":
        rationale = spec.get("rationale", "")
        text = f"{spec['text']} (why: {rationale})" if rationale else spec["text"]
        payload = {"decision": spec["text"], **({"rationale": rationale} if rationale else {})}
    else:
        text = spec["text"]
        label = {"convention": "scope", "pattern": "domain", "preference": "category"}.get(kind)
        if label:
            extra.append(spec.get(label, "general"))
        payload = {kind: text, **({label: extra[-1]} if label else {})}
    return store.new_item(
        kind,
        text,
        importance=spec.get("importance", _KIND_IMPORTANCE.get(kind, 0.5)),
        tags=(kind, *extra),
        payload=payload,
        **fields,
    )


def ingest(
    sample: SampleProject,
    project: ProjectMemoryStore,
    user: GlobalMemoryStore,
    *,
    now: datetime,
    advance: Callable[[int], None] | None = None,
) -> int:
    """Reset the sample's namespaces and load its sessions and global memories; return count."""
    project.clear()
    user.clear()
    count = 0
    for session in sample.sessions:
        start = now - timedelta(days=session["days_ago"])
        items = [
            _item(project, spec, session=session["id"], timestamp=start + timedelta(minutes=n))
            for n, spec in enumerate(session["items"])
        ]
        project.add_many(items)  # one batched write (and one embedding call) per session
        count += len(items)
        if advance is not None:
            advance(len(items))
    start = now - timedelta(days=60)
    items = [
        _item(user, spec, timestamp=start + timedelta(minutes=n))
        for n, spec in enumerate(sample.global_items)
    ]
    user.add_many(items)
    if advance is not None:
        advance(len(items))
    return count + len(items)
