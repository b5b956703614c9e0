"""Redaction: secrets and personal data are taken out of memories before anything stores them.

An agent's memory holds what users and tools said, and both say things no memory should
keep: an API key pasted into a chat, a connection string in a stack trace, a customer's
e-mail address in a tool's output. A tier store passes every item it is about to write
through its :class:`RedactionPolicy` first (``docs/ingestion.md``), so neither the database,
the vector index, the full-text index nor the audit log ever sees the secret; the audit log
records that a redaction happened and of what kinds, never what was redacted.

What happens to a finding is its kind's :class:`RedactionMode`: ``mask`` replaces it with
``[REDACTED:<kind>]`` (the default: the memory still says a key was there), ``drop`` removes
it, ``tag`` keeps the text and tags the item ``sensitive:<kind>`` (for stores whose readers
are entitled to it, and which want to know), ``off`` does not look for it. A policy sets one
mode for every kind, overrides it per kind, and may give items of some kinds (a ``tool_output``,
a ``preference``) a policy of their own.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from agent_engine.redaction._detectors import DEFAULT_DETECTORS, Detector, Finding

if TYPE_CHECKING:
    from agent_engine.models import ContextItem

__all__ = [
    "DEFAULT_DETECTORS",
    "DEFAULT_REDACTION",
    "Detector",
    "Finding",
    "Redacted",
    "RedactionMode",
    "RedactionPolicy",
    "SENSITIVE_TAG",
]

SENSITIVE_TAG = "sensitive:"
"""Prefix of the tags ``tag`` mode gives an item: ``sensitive:email``, ..."""


class RedactionMode(enum.StrEnum):
    """What a policy does with a finding of one kind."""

    MASK = "mask"
    """Replace it with ``[REDACTED:<kind>]``."""
    DROP = "drop"
    """Remove it from the text."""
    TAG = "tag"
    """Keep the text; tag the item ``sensitive:<kind>``."""
    OFF = "off"
    """Do not look for it."""


@attrs.frozen
class Redacted:
    """An item as a policy lets it be stored, and what was found in it.

    ``found``: how many findings of each kind (text and payload together); ``modes``: what
    was done with each kind found. Both empty when nothing was found (``item`` is then the
    item given).
    """

    item: ContextItem
    found: Mapping[str, int] = attrs.field(factory=dict)
    modes: Mapping[str, RedactionMode] = attrs.field(factory=dict)

    def detail(self) -> dict[str, Any]:
        """What the audit log keeps of it: the item, the kinds and counts, the modes."""
        return {
            "id": self.item.id,
            "found": dict(sorted(self.found.items())),
            "modes": {kind: str(mode) for kind, mode in sorted(self.modes.items())},
        }


def _modes(value: Mapping[str, RedactionMode | str]) -> dict[str, RedactionMode]:
    return {str(kind): RedactionMode(mode) for kind, mode in value.items()}


@attrs.frozen
class RedactionPolicy:
    """How a store redacts what it writes (see the module docstring).

    ``mode``: for every kind not in ``kinds``; ``kinds``: a mode per kind of finding
    (``"email"``, ``"phone"``, ``"openai_api_key"``, ``"high_entropy"``...: the ``kind`` of
    :data:`DEFAULT_DETECTORS`); ``item_kinds``: a policy of its own for items of a kind
    (``None`` there: such items are stored as given); ``detectors``: what is looked for.
    """

    mode: RedactionMode = attrs.field(default=RedactionMode.MASK, converter=RedactionMode)
    kinds: Mapping[str, RedactionMode] = attrs.field(factory=dict, converter=_modes)
    item_kinds: Mapping[str, RedactionPolicy | None] = attrs.field(factory=dict)
    detectors: tuple[Detector, ...] = attrs.field(default=DEFAULT_DETECTORS, converter=tuple)
    _active: tuple[Detector, ...] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        active = tuple(d for d in self.detectors if self.mode_of(d.kind) is not RedactionMode.OFF)
        object.__setattr__(self, "_active", active)

    def for_kind(self, item_kind: str) -> RedactionPolicy | None:
        """The policy for items of ``item_kind`` (``None``: stored as given)."""
        return self.item_kinds.get(item_kind, self)

    def mode_of(self, kind: str) -> RedactionMode:
        """What this policy does with a finding of ``kind``."""
        return self.kinds.get(kind, self.mode)

    def find(self, text: str) -> list[Finding]:
        """The findings in ``text`` this policy acts on, in text order, none overlapping.

        Where two overlap, the detector of higher priority wins (then the earlier, then the
        longer finding), so a GitHub token is reported as one, not as a random string.
        """
        found = [
            (detector.priority, finding)
            for detector in self._active
            for finding in detector.find(text)
        ]
        if not found:
            return []
        found.sort(key=lambda pair: (-pair[0], pair[1].start, pair[1].start - pair[1].end))
        kept: list[Finding] = []
        for _, finding in found:
            if all(finding.end <= k.start or finding.start >= k.end for k in kept):
                kept.append(finding)
        return sorted(kept, key=lambda f: f.start)

    def redact_text(self, text: str) -> tuple[str, list[Finding]]:
        """``text`` with its findings masked or dropped as their modes say; the findings."""
        findings = self.find(text)
        parts: list[str] = []
        at = 0
        for finding in findings:
            mode = self.mode_of(finding.kind)
            if mode is RedactionMode.TAG:
                continue
            parts.append(text[at : finding.start])
            if mode is RedactionMode.MASK:
                parts.append(f"[REDACTED:{finding.kind}]")
            at = finding.end
        parts.append(text[at:])
        return "".join(parts), findings

    def redact(self, item: ContextItem) -> Redacted:
        """``item`` as this policy (or its kind's) lets it be stored; what was found.

        Its text and every string of its payload are redacted alike.
        """
        policy = self.for_kind(item.kind)
        if policy is None:
            return Redacted(item)
        text, findings = policy.redact_text(item.text)
        payload = policy._payload(item.payload, findings)  # noqa: SLF001 - same class
        if not findings:
            return Redacted(item)
        found = Counter(finding.kind for finding in findings)
        modes = {kind: policy.mode_of(kind) for kind in found}
        tags = [
            f"{SENSITIVE_TAG}{kind}" for kind, mode in modes.items() if mode is RedactionMode.TAG
        ]
        changes: dict[str, Any] = {"text": text, "payload": payload}
        if tags:
            changes["tags"] = (*item.tags, *(t for t in sorted(tags) if t not in item.tags))
        if text != item.text or payload != item.payload:
            changes["token_cost"] = None  # counted again by the store, on what it keeps
        return Redacted(attrs.evolve(item, **changes), dict(found), modes)

    def _payload(self, value: Any, findings: list[Finding]) -> Any:
        """``value`` (JSON) with every string in it redacted; findings appended to ``findings``."""
        if isinstance(value, str):
            text, found = self.redact_text(value)
            findings.extend(found)
            return text
        if isinstance(value, Mapping):
            return {key: self._payload(inner, findings) for key, inner in value.items()}
        if isinstance(value, list | tuple):
            return [self._payload(inner, findings) for inner in value]
        return value

    def redact_many(self, items: Iterable[ContextItem]) -> list[Redacted]:
        """:meth:`redact` of each item, in order."""
        return [self.redact(item) for item in items]


DEFAULT_REDACTION = RedactionPolicy()
"""What stores redact unless told otherwise: every kind found, masked."""
