"""Deciding what to remember: most turns of a conversation are not worth a memory.

"Thanks!", "Bye Joanna, take care!", "haha", ";)": a chat is full of turns that say nothing a
later question could need, and storing them costs what any memory costs (a row, a vector, a
place in the ranking where they crowd out what matters). A :class:`MemoryDecider` looks at
each item before it is written and either keeps it or drops it with a reason the caller can
show or log.

:class:`RuleDecider`, the default, drops only turns made *entirely* of small talk: greetings
and farewells, thanks and acknowledgements, laughter and interjections, with at most one
capitalised word among them (the name a greeting is addressed to), and turns with no word at
all (an emoji, punctuation). One word that is not small talk keeps a turn: "Paris!" may
answer a question, "Thanks for the ride to the airport" holds a fact. Drop less rather than
more: a dropped turn is gone, a kept one only costs space. On LoCoMo it drops about 2% of the
turns and none that a question needs (``docs/benchmarks.md``, "Deciding what to remember").
"""

from __future__ import annotations

import re
from typing import Protocol, runtime_checkable

import attrs

from agent_engine.models import ContextItem

__all__ = [
    "DEFAULT_DECIDER",
    "Decision",
    "MemoryDecider",
    "Reason",
    "RuleDecider",
    "decide_safely",
]


class Reason:
    """Why the default decider drops a turn (the values of :attr:`Decision.reason`)."""

    GREETING = "greeting"
    """Hellos and goodbyes."""
    ACKNOWLEDGEMENT = "acknowledgement"
    """Thanks, agreement, "ok", "sounds good"."""
    CHIT_CHAT = "chit_chat"
    """Laughter, interjections and pleasantries."""
    NEAR_EMPTY = "near_empty"
    """No word at all: an emoji, punctuation, whitespace."""


@attrs.frozen
class Decision:
    """Whether to store an item, and why not when not (``reason`` is empty when kept)."""

    keep: bool
    reason: str = ""

    @classmethod
    def kept(cls) -> Decision:
        """Store it."""
        return _KEPT

    @classmethod
    def dropped(cls, reason: str) -> Decision:
        """Do not store it, because of ``reason``."""
        return cls(keep=False, reason=reason)


_KEPT = Decision(keep=True)


@runtime_checkable
class MemoryDecider(Protocol):
    """**Protocol:** decides whether an item is worth storing before it is written."""

    def decide(self, item: ContextItem) -> Decision:
        """Keep ``item``, or drop it with a reason."""
        ...


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_GREETING = _words(
    "hi hello hey heya hiya yo morning evening afternoon night goodnight bye goodbye byebye "
    "later see ya cya ttyl talk soon care catch welcome back meet nice to you u there "
    "take tomorrow around then now for until next time have a an good great day week weekend "
    "fun enjoy yourself safe travels"
)
_ACKNOWLEDGEMENT = _words(
    "thanks thank thx ty tysm appreciate appreciated it ok okay k kk sure yes yeah yep yup ya "
    "got cool great awesome nice perfect alright allright sounds good will do noted agreed "
    "agree right indeed totally absolutely definitely fine no problem worries np much so "
    "really too same here me i that that's thats is the spirit true exactly of course "
    "anytime welcome you're youre"
)
_CHIT_CHAT = _words(
    "lol lmao rofl haha hahaha hah heh hehe wow oh ah ahh aw aww awww hmm hm mm ooh oops "
    "omg yay woohoo hooray wowww whoa cool neat sweet"
)
_SMALL_TALK = _GREETING | _ACKNOWLEDGEMENT | _CHIT_CHAT
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?")


@attrs.frozen
class RuleDecider:
    """The default :class:`MemoryDecider`: drops turns that are only small talk.

    ``kinds``: the item kinds it judges (conversation turns and messages); items of any other
    kind (a decision, a tool output, a preference) are always kept: someone chose to write
    them. ``speaker_prefix``: a leading ``"<source>: "`` in the text is the speaker, not what
    was said, and is left out of the judgement.
    """

    kinds: frozenset[str] = attrs.field(
        default=frozenset({"turn", "message", "chat", "utterance"}), converter=frozenset
    )
    speaker_prefix: bool = True

    def decide(self, item: ContextItem) -> Decision:
        """Keep ``item``, or drop it as a greeting, acknowledgement, chit-chat or near-empty."""
        if item.kind not in self.kinds or (item.payload and not item.text.strip()):
            return Decision.kept()
        text = item.text
        if self.speaker_prefix and item.source and text.startswith(f"{item.source}:"):
            text = text[len(item.source) + 1 :]
        words = _WORD.findall(text)
        if not words:
            return Decision.dropped(Reason.NEAR_EMPTY)
        # One capitalised word after the first may be a name ("Bye Nate!"); any other word
        # that is not small talk is something said ("Where is it?").
        named = [i for i, w in enumerate(words) if w.lower() not in _SMALL_TALK]
        if len(named) > 1 or (named and (named[0] == 0 or not words[named[0]][:1].isupper())):
            return Decision.kept()
        lowered = {w.lower() for w in words}
        if lowered & _GREETING - _ACKNOWLEDGEMENT - _CHIT_CHAT:
            return Decision.dropped(Reason.GREETING)
        if lowered & _ACKNOWLEDGEMENT - _CHIT_CHAT:
            return Decision.dropped(Reason.ACKNOWLEDGEMENT)
        return Decision.dropped(Reason.CHIT_CHAT)


DEFAULT_DECIDER = RuleDecider()
"""The decider the write path uses unless given another."""


def decide_safely(decider: MemoryDecider | None, item: ContextItem) -> tuple[Decision, str | None]:
    """``decider``'s verdict on ``item``, and why it could not give one (``None``: it could).

    A decider is often the user's code. One that raises, or answers something other than a
    :class:`Decision` (a drop without a reason included), keeps the item: dropping is the one
    thing a failing decider must not do. The error comes back for the caller to report. No
    decider keeps everything.
    """
    if decider is None:
        return Decision.kept(), None
    try:
        verdict = decider.decide(item)
    except Exception as error:  # noqa: BLE001 - the user's code; contained and reported
        return Decision.kept(), f"decider raised {type(error).__name__}: {error}"
    if not isinstance(verdict, Decision) or (not verdict.keep and not verdict.reason):
        return Decision.kept(), f"decider returned {verdict!r}, not a Decision with a reason"
    return verdict, None
