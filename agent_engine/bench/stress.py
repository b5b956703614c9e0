"""Stressed copies of a conversation: the situations where a default tuned on one dataset slips.

Issue-driven regression checks, built from the data at hand rather than from data the
defaults were never tuned on. Each takes a conversation and returns one that says the same
things in a shape users' data often has, with the same questions:

* ``full-names``: every speaker is labelled with a two-word name ("Caroline Ellis"), while
  the questions keep the first name: what a chat export with full display names gives, and
  what name matching must be tolerant of;
* ``nicknames``: every speaker whose name has six letters or more is labelled with its
  first four ("Caroline" becomes "Caro"), while the questions keep the name: a chat whose
  people go by short names, asked about by their full ones;
* ``short-messages``: every turn is sent as one message per sentence, as people type in a
  chat; each message is an item of its own and each is evidence when its turn was. Neighbour
  smoothing and packing were tuned on long turns.

The quality part measures each beside the plain conversation (``--stress``), as a group of its
own; the overall figures stay the plain conversations'.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import timedelta

import attrs

from agent_engine.bench.locomo import Conversation
from agent_engine.models import ContextItem

__all__ = ["STRESS", "full_names", "nicknames", "short_messages"]

_SURNAMES = ("Ellis", "Moreno", "Okafor", "Lindqvist", "Tanaka", "Novak")
_NICKNAME = 4
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")


def full_names(conversation: Conversation) -> Conversation:
    """Each speaker labelled with a first and a last name; the questions as they were."""
    speakers = _speakers(conversation)
    return _relabelled(
        conversation,
        {
            speaker: f"{speaker} {_SURNAMES[n % len(_SURNAMES)]}"
            for n, speaker in enumerate(speakers)
        },
    )


def nicknames(conversation: Conversation) -> Conversation:
    """Each speaker of a long name labelled with its first four letters; the questions as they were.

    Names of five letters or fewer stay: they are short names already, and cut shorter they
    would read as words ("Gin", "Mar").
    """
    return _relabelled(
        conversation,
        {s: s[:_NICKNAME] if len(s) > _NICKNAME + 1 else s for s in _speakers(conversation)},
    )


def _speakers(conversation: Conversation) -> list[str]:
    return list(dict.fromkeys(item.source for item in conversation.items))


def _relabelled(conversation: Conversation, labels: Mapping[str, str]) -> Conversation:
    """``conversation`` with each speaker labelled ``labels[speaker]``, in source and text."""

    def renamed(item: ContextItem) -> ContextItem:
        label = f"{item.source}: "
        text = item.text
        if text.startswith(label):
            text = f"{labels[item.source]}: {text[len(label) :]}"
        return attrs.evolve(item, source=labels[item.source], text=text)

    return attrs.evolve(conversation, items=tuple(renamed(item) for item in conversation.items))


def short_messages(conversation: Conversation) -> Conversation:
    """Each turn as one message per sentence; a split turn's evidence is all its messages."""
    items: list[ContextItem] = []
    pieces: dict[str, list[str]] = {}
    for item in conversation.items:
        label = f"{item.source}: "
        body = item.text.removeprefix(label)
        sentences = _SENTENCE_END.split(body)
        ids = [item.id if n == 0 else f"{item.id}#{n}" for n in range(len(sentences))]
        pieces[item.id] = ids
        items.extend(
            attrs.evolve(
                item,
                id=piece_id,
                text=f"{label}{sentence}" if item.text.startswith(label) else sentence,
                timestamp=item.timestamp + timedelta(milliseconds=n),
            )
            for n, (piece_id, sentence) in enumerate(zip(ids, sentences, strict=True))
        )
    questions = tuple(
        attrs.evolve(
            question, evidence=tuple(p for turn in question.evidence for p in pieces.get(turn, ()))
        )
        for question in conversation.questions
    )
    return attrs.evolve(conversation, items=tuple(items), questions=questions)


STRESS: Mapping[str, Callable[[Conversation], Conversation]] = {
    "full-names": full_names,
    "nicknames": nicknames,
    "short-messages": short_messages,
}
"""Each stressed copy by the name ``--stress`` takes and its group is reported under."""
