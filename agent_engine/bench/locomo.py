"""Reading LoCoMo (Maharana et al., ACL 2024) into memory items and evidence-labelled questions.

Each turn becomes one project-memory item: its text is ``"Speaker: words"`` (plus the caption
of a shared image, which is what the speaker showed), ``source`` the speaker, ``session`` the
session, and ``timestamp`` the session's date (plus the turn's position in seconds, so the
timeline keeps the order of the conversation). The evidence defects listed in the data's
SOURCE.md are repaired the documented way: multi-id strings are split, ``D:11:26`` is read as
``D11:26``, a bare ``D`` and ids absent from the conversation are dropped, and questions
left without evidence are skipped.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import attrs

from agent_engine.errors import ValidationError
from agent_engine.models import ContextItem, Tier

__all__ = ["Conversation", "Question", "default_data_path", "load"]

DATA_ENV = "AGENT_ENGINE_LOCOMO"
"""Environment variable naming the LoCoMo file (or the folder holding ``locomo10.json``)."""

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")


@attrs.frozen
class Question:
    """A question with the ids of the turns that hold its answer, and the answer."""

    text: str
    category: int
    evidence: tuple[str, ...]
    answer: str = ""
    """The gold answer (category 5's adversarial one), as text."""


@attrs.frozen
class Conversation:
    """One LoCoMo sample: its turns as items (in order) and its questions."""

    sample_id: str
    index: int
    items: tuple[ContextItem, ...]
    questions: tuple[Question, ...]
    ends_at: datetime


def default_data_path() -> Path:
    """``$AGENT_ENGINE_LOCOMO``, else ``../shared/data/locomo/locomo10.json`` (from the cwd)."""
    configured = os.environ.get(DATA_ENV)
    path = Path(configured) if configured else Path("../shared/data/locomo/locomo10.json")
    return path / "locomo10.json" if path.is_dir() else path


def item_id(sample_id: str, dia_id: str) -> str:
    """The item id of a turn (unique across conversations)."""
    return f"{sample_id}:{dia_id}"


def _turns(sample: dict, namespace: str) -> Iterator[ContextItem]:  # type: ignore[type-arg]
    conversation = sample["conversation"]
    sessions = sorted(
        (int(key.split("_")[1]), turns)
        for key, turns in conversation.items()
        if re.fullmatch(r"session_\d+", key) and isinstance(turns, list)
    )
    for number, turns in sessions:
        # The data has no zone; its dates are read as UTC.
        started = datetime.strptime(
            conversation[f"session_{number}_date_time"], "%I:%M %p on %d %B, %Y"
        ).replace(tzinfo=UTC)
        for position, turn in enumerate(turns):
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares image: {turn['blip_caption']}]"
            yield ContextItem(
                id=item_id(sample["sample_id"], turn["dia_id"]),
                kind="turn",
                text=text,
                tier=Tier.PROJECT,
                namespace=namespace,
                source=turn["speaker"],
                session=f"session {number}",
                timestamp=started + timedelta(seconds=position),
                payload={"dia_id": turn["dia_id"]},
            )


def _evidence(raw: list[str], known: set[str], sample_id: str) -> tuple[str, ...]:
    ids: list[str] = []
    for entry in raw:
        for session, turn in _EVIDENCE.findall(entry):
            candidate = item_id(sample_id, f"D{session}:{turn}")
            if candidate in known and candidate not in ids:
                ids.append(candidate)
    return tuple(ids)


def load(path: Path | str | None = None) -> list[Conversation]:
    """Read ``locomo10.json`` into conversations (index = position in the file)."""
    file = Path(path) if path is not None else default_data_path()
    if file.is_dir():
        file = file / "locomo10.json"
    if not file.is_file():
        raise ValidationError(
            f"LoCoMo data not found at {file}; pass its path or set {DATA_ENV}", value=str(file)
        )
    samples = json.loads(file.read_text(encoding="utf-8"))
    conversations = []
    for index, sample in enumerate(samples):
        namespace = f"project:{sample['sample_id']}"
        items = tuple(_turns(sample, namespace))
        known = {item.id for item in items}
        questions = []
        for qa in sample["qa"]:
            evidence = _evidence(qa.get("evidence", []), known, sample["sample_id"])
            if evidence:
                answer = str(qa.get("answer", qa.get("adversarial_answer", "")))
                questions.append(Question(qa["question"], int(qa["category"]), evidence, answer))
        conversations.append(
            Conversation(sample["sample_id"], index, items, tuple(questions), items[-1].timestamp)
        )
    return conversations
