"""What makes a task's item worth keeping: the promotion signals, their weights, and presets.

Seed 001 section 9 scores a finding by weighted signals and auto-promotes it at a threshold
(3 points by default), after hard filters (content shorter than 30 characters or importance
under 0.25 is skipped); a preset (conservative, balanced, aggressive) sets the threshold and
the filters. Seed 003 consolidates what was accessed three times or more. A
:class:`PromotionPreset` holds all of it, validated when it is built, so a bad weight or an
unknown preset name is refused before any store changes.

The signals are those a task store can observe on its own items, never looking past its
scope (:class:`Signal`). Two of the seed's cannot be observed here:

- ``user-intent`` (``/remember``) is an explicit :func:`~agent_engine.tiers.promotion.promote`
  call: it bypasses this pipeline altogether and lands confirmed, not quarantined;
- ``multi-agent`` (referenced by two or more agents): access tracking counts how often and
  when an item was chosen for a context, not for whom, so who referenced it is not recorded.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Final

import attrs

from agent_engine import _validate
from agent_engine.errors import ValidationError
from agent_engine.models import ContextItem

__all__ = [
    "AGGRESSIVE",
    "BALANCED",
    "CONSERVATIVE",
    "DEFAULT_WEIGHTS",
    "PRESETS",
    "Evidence",
    "PromotionPreset",
    "Signal",
    "evidence",
    "hard_filter",
    "resolve_preset",
]


class Signal(enum.StrEnum):
    """A reason to promote an item that a task store can observe on its own items."""

    FREQUENT_ACCESS = "frequent-access"
    """Chosen for a context ``min_access`` times or more (seed 003: ``access_count >= 3``)."""
    MULTI_SESSION = "multi-session"
    """The same content (fingerprint) recorded in two or more sessions of the task."""
    ERROR_RESOLUTION = "error-resolution"
    """An item of a failure kind: its kind, or one of its tags, is in ``failure_kinds``."""
    HIGH_IMPORTANCE = "high-importance"
    """Importance at or above ``high_importance`` (0.7)."""
    EXPLICIT_PIN = "explicit-pin"
    """The item is pinned: someone marked it as always worth showing."""


DEFAULT_WEIGHTS: Final[Mapping[Signal, float]] = {
    Signal.FREQUENT_ACCESS: 3.0,
    Signal.MULTI_SESSION: 2.0,
    Signal.ERROR_RESOLUTION: 2.0,
    Signal.HIGH_IMPORTANCE: 1.0,
    Signal.EXPLICIT_PIN: 5.0,
}
"""The seed's points per signal; frequent access weighs 3, the balanced threshold, so that
seed 003's rule (accessed three times) promotes on its own under the balanced preset."""


@attrs.frozen
class Evidence:
    """One signal an item carries: which, the points it is worth, and the fact behind it."""

    signal: Signal
    points: float
    detail: str
    """What was observed, for a person: ``"accessed 4 times (>= 3)"``."""


def _name(value: object) -> str:
    return _validate.identifier("name", value)


def _threshold(value: object) -> float:
    number = _validate.real("threshold", value)
    if number <= 0:
        raise ValidationError(
            f"threshold must be a positive number of points, got {value!r}",
            field="threshold",
            value=value,
        )
    return number


def _weights(value: object) -> tuple[tuple[Signal, float], ...]:
    """Every signal's points: those given, the seed's for the signals not named.

    Takes a mapping, or the pairs a preset holds (what ``attrs.evolve`` passes back).
    """
    if isinstance(value, Mapping):
        pairs = list(value.items())
    elif isinstance(value, tuple) and all(isinstance(p, tuple) and len(p) == 2 for p in value):  # noqa: PLR2004
        pairs = list(value)
    else:
        raise ValidationError(
            f"weights must map signals to points, got {type(value).__name__}",
            field="weights",
            value=value,
        )
    given: dict[Signal, float] = {}
    for key, points in pairs:
        try:
            signal = Signal(key)
        except ValueError:
            known = ", ".join(signal.value for signal in Signal)
            raise ValidationError(
                f"unknown signal {key!r} in weights; known: {known}", field="weights", value=key
            ) from None
        number = _validate.real(f"weights[{signal.value}]", points)
        if number < 0:
            raise ValidationError(
                f"the weight of {signal.value} must be 0 or more, got {points!r}",
                field="weights",
                value=points,
            )
        given[signal] = number
    return tuple((signal, given.get(signal, DEFAULT_WEIGHTS[signal])) for signal in Signal)


def _unit(field: str, value: object) -> float:
    number = _validate.real(field, value)
    if not 0.0 <= number <= 1.0:
        raise ValidationError(f"{field} must be in [0, 1], got {value!r}", field=field, value=value)
    return number


def _min_importance(value: object) -> float:
    return _unit("min_importance", value)


def _high_importance(value: object) -> float:
    return _unit("high_importance", value)


def _min_content_length(value: object) -> int:
    return _validate.integer("min_content_length", value)


def _min_access(value: object) -> int:
    return _validate.integer("min_access", value, minimum=1, maximum=_validate.MAX_COUNT)


def _kinds(field: str, value: object) -> frozenset[str]:
    return frozenset(_validate.identifier(field, kind) for kind in _validate.sequence(field, value))


def _failure_kinds(value: object) -> frozenset[str]:
    return _kinds("failure_kinds", value)


def _skip_kinds(value: object) -> frozenset[str]:
    return _kinds("skip_kinds", value)


@attrs.frozen
class PromotionPreset:
    """How eagerly a task's items are auto-promoted: a threshold, signal weights, hard filters.

    An item whose signals add up to ``threshold`` points or more, and that passes the hard
    filters (``min_content_length`` characters of content, ``min_importance``), is promoted.
    ``weights`` maps signals to points; a signal not named keeps the seed's
    (:data:`DEFAULT_WEIGHTS`). ``min_access`` is how many accesses make frequent access,
    ``high_importance`` the importance that counts as high, ``failure_kinds`` the kinds (or
    tags) of error findings. Items of ``skip_kinds`` are never candidates: by default the
    task's instruction, which the assembler puts in every context as HEAD, so its access
    count measures nothing, and which states the task rather than something learned by it.
    Build one from a preset with ``attrs.evolve(BALANCED, name="mine", threshold=4)``.
    """

    name: str = attrs.field(converter=_name)
    threshold: float = attrs.field(default=3.0, converter=_threshold)
    weights: tuple[tuple[Signal, float], ...] = attrs.field(
        default=DEFAULT_WEIGHTS, converter=_weights
    )
    min_content_length: int = attrs.field(default=30, converter=_min_content_length)
    min_importance: float = attrs.field(default=0.25, converter=_min_importance)
    min_access: int = attrs.field(default=3, converter=_min_access)
    high_importance: float = attrs.field(default=0.7, converter=_high_importance)
    failure_kinds: frozenset[str] = attrs.field(
        default=frozenset({"failure", "error"}), converter=_failure_kinds
    )
    skip_kinds: frozenset[str] = attrs.field(
        default=frozenset({"instruction"}), converter=_skip_kinds
    )

    def points(self, signal: Signal) -> float:
        """The points ``signal`` is worth under this preset."""
        return dict(self.weights)[signal]

    def score(self, found: Iterable[Evidence]) -> float:
        """The points of ``found`` together."""
        return sum(item.points for item in found)


CONSERVATIVE: Final = PromotionPreset(
    "conservative", threshold=5.0, min_content_length=50, min_importance=0.5, min_access=5
)
"""Promotes only on strong evidence: a pin, or several signals together."""
BALANCED: Final = PromotionPreset("balanced")
"""The seed's defaults: 3 points, 30 characters, importance 0.25, three accesses."""
AGGRESSIVE: Final = PromotionPreset(
    "aggressive", threshold=2.0, min_content_length=10, min_importance=0.1, min_access=2
)
"""Promotes on one signal of two points, with loose filters; expect more to review."""

PRESETS: Final[Mapping[str, PromotionPreset]] = {
    preset.name: preset for preset in (CONSERVATIVE, BALANCED, AGGRESSIVE)
}
"""The presets a name can choose (``MemoryStores(promotion="balanced")``)."""


def resolve_preset(value: PromotionPreset | str) -> PromotionPreset:
    """``value`` if it is a preset, else the preset of that name; unknown names are refused."""
    if isinstance(value, PromotionPreset):
        return value
    if isinstance(value, str) and value in PRESETS:
        return PRESETS[value]
    known = ", ".join(PRESETS)
    raise ValidationError(
        f"unknown promotion preset {value!r}; known: {known} (or pass a PromotionPreset)",
        field="promotion",
        value=value,
    )


def hard_filter(item: ContextItem, preset: PromotionPreset) -> str | None:
    """Why ``item`` is filtered out before scoring, or ``None`` when it passes."""
    length = len(item.body.strip())
    if length < preset.min_content_length:
        return f"content of {length} characters, under {preset.min_content_length}"
    if item.importance < preset.min_importance:
        return f"importance {item.importance:.2f}, under {preset.min_importance:.2f}"
    return None


def evidence(item: ContextItem, preset: PromotionPreset, sessions: int) -> tuple[Evidence, ...]:
    """The signals ``item`` carries; ``sessions``: how many sessions recorded its content."""
    found: list[tuple[Signal, str]] = []
    if item.access_count >= preset.min_access:
        found.append(
            (Signal.FREQUENT_ACCESS, f"accessed {item.access_count} times (>= {preset.min_access})")
        )
    if sessions >= 2:  # noqa: PLR2004 - "two or more sessions" is the signal's definition
        found.append((Signal.MULTI_SESSION, f"recorded in {sessions} sessions"))
    failure = sorted(preset.failure_kinds & {item.kind, *item.tags})
    if failure:
        found.append((Signal.ERROR_RESOLUTION, f"a {failure[0]} finding"))
    if item.importance >= preset.high_importance:
        found.append(
            (
                Signal.HIGH_IMPORTANCE,
                f"importance {item.importance:.2f} (>= {preset.high_importance:.2f})",
            )
        )
    if item.pinned:
        found.append((Signal.EXPLICIT_PIN, "pinned"))
    return tuple(Evidence(signal, preset.points(signal), detail) for signal, detail in found)
