"""What ``build_context`` returns: the chosen items in prompt order, and why the rest were not.

A package explains itself: for every tier, the budget it was allocated and what it used (what
its part of the render costs); for every selected item, its score and why it was chosen
(pinned, head, tail, ranked); for every candidate left out, why (duplicate, expired, below
threshold, lower score, no room for its header, over budget); for every tier whose backend
failed, in which phase; and, when the assembler summarizes, what the summary of the
candidates left out for lack of room holds and who wrote it.
"""

from __future__ import annotations

import enum
from typing import Literal

import attrs

from agent_engine.assembler.conflicts import MarkedConflict
from agent_engine.assembler.pressure import MemoryPressure
from agent_engine.assembler.render import Layout, Line, RenderFormat, render_lines
from agent_engine.models import ContextItem, Tier

__all__ = [
    "LACK_OF_ROOM",
    "ContextPackage",
    "FailurePhase",
    "Omission",
    "OmissionReason",
    "Selection",
    "SelectionReason",
    "Summary",
    "TierFailure",
    "TierUsage",
]

FailurePhase = Literal["history", "aliases", "gather", "widen", "access", "conflicts"]
"""When a tier's backend failed: ``history`` (reading the task's last items for the query
builder: the query was built without them), ``aliases`` (reading the project's aliases:
the build matched the query as written), ``gather`` (the first read of its candidates:
the tier has no items in the package), ``widen`` (a wider second gather: the tier keeps what
its first gather found), ``access`` (recording the accesses of its chosen items: they are in
the package), ``conflicts`` (reading its open conflicts: its items are in the package,
unmarked)."""


class SelectionReason(enum.StrEnum):
    """Why an item is in the package."""

    PINNED = "pinned"
    HEAD = "head"
    """One of the first items of the task timeline (the task's instructions)."""
    TAIL = "tail"
    """One of the most recent items of the task timeline."""
    RANKED = "ranked"
    """Chosen by the scoring policy."""


class OmissionReason(enum.StrEnum):
    """Why a candidate is not in the package."""

    DUPLICATE = "duplicate"
    """Same content (fingerprint) as an item already chosen, in any tier."""
    EXPIRED = "expired"
    """Its time to live had run out."""
    BELOW_THRESHOLD = "below_threshold"
    """Its score was under the ``min_score`` of the request (else of the assembler)."""
    LOWER_SCORE = "lower_score"
    """It would have fit beside the pinned items, but higher-priority items took the room."""
    NO_ROOM_FOR_HEADER = "no_room_for_header"
    """Its line fits in all the budget its tier could get, but not with the tier's section or
    session header it would open there (one the pinned items had not opened)."""
    OVER_BUDGET = "over_budget"
    """Its line alone is larger than all the budget its tier could get."""
    LIMIT = "limit"
    """The package held as many items as the request's ``limit`` allows."""


LACK_OF_ROOM = frozenset(
    {OmissionReason.LOWER_SCORE, OmissionReason.NO_ROOM_FOR_HEADER, OmissionReason.OVER_BUDGET}
)
"""The reasons that mean "paged out for lack of room": more room would have brought the
candidate in (not so the duplicates, the expired or those under the score threshold). What
memory pressure counts (:mod:`.pressure`) and what a summary covers (:mod:`.summary`)."""


@attrs.frozen
class Selection:
    """A chosen item.

    ``tokens``: what its line and the headers it opened cost on their own (with the default
    counter, counted as one text). A count rounds up, so the selections' tokens may add up to
    a little more than the package's ``tokens_used``, which is what the whole render costs.
    """

    item: ContextItem
    tier: Tier
    score: float
    reason: SelectionReason
    tokens: int
    body: str
    truncated: bool = False

    @property
    def from_archive(self) -> bool:
        """Whether the item was paged in from the archive (a match outside the working set)."""
        return self.item.archived


@attrs.frozen
class Omission:
    """A candidate left out, and why.

    ``tokens``: what its line and the headers the package has not opened would cost on their
    own, as a selection's (0 for candidates left out before packing: expired, below threshold).
    """

    item_id: str
    tier: Tier
    reason: OmissionReason
    tokens: int
    score: float | None = None


@attrs.frozen
class TierUsage:
    """A tier's budget: its share, what it used (spill-over included) and its candidates.

    ``used`` is the tier's part of what the render costs: the tiers' figures add up to the
    count of the whole rendered package.
    """

    tier: Tier
    allocated: int
    used: int
    candidates: int
    selected: int


@attrs.frozen
class TierFailure:
    """A tier whose backend failed during the build, and in which phase (see ``FailurePhase``).

    The package stays whole without it: a tier that failed to gather has no items in it, one
    that failed later keeps what it had.
    """

    tier: Tier
    error: str
    phase: FailurePhase = "gather"


@attrs.frozen
class Summary:
    """The summary of the candidates a build left out for lack of room (:mod:`.summary`).

    ``text``: the summary section's body as the render shows it; empty when no summarizer
    gave a usable one (``error`` says why), and then the render has no section.
    ``tokens``: what the section adds to the count of the render (0 when ``text`` is empty):
    the package's ``tokens_used`` is the tiers' use plus this. ``allowance``: the tokens the
    summarizer was asked to keep its text within. ``sources``: the ids of the left-out items
    it was given, most relevant first (what it could draw on, not all of which its text
    shows). ``summarizer``: the name of the summarizer whose text this is: the fallback's
    when the configured one failed. ``truncated``: the text was cut at a word boundary to
    fit (its summarizer answered more than the room). ``error``: why the configured
    summarizer's text is not used (it raised, answered something other than text, or
    nothing), ``None`` when it is.
    """

    text: str
    tokens: int
    allowance: int
    sources: tuple[str, ...]
    summarizer: str
    truncated: bool = False
    error: str | None = None


@attrs.frozen
class ContextPackage:
    """The assembled context for one task step."""

    id: str
    task_id: str
    budget_tokens: int
    policy: str
    layout: Layout
    selections: tuple[Selection, ...]
    omissions: tuple[Omission, ...]
    usage: tuple[TierUsage, ...]
    failures: tuple[TierFailure, ...] = ()
    candidate_tokens: int = 0
    conflicts: tuple[MarkedConflict, ...] = ()
    """The open conflicts both of whose items were selected, as the render marks them."""
    query: str = ""
    """What the candidates were ranked against: the request's query as the assembler's query
    builder made it (with the last turns before a vague request, or a rewrite)."""
    degraded: bool = False
    """Whether the assembler's SLO guard had builds degraded (``AssemblerConfig.slo``): this
    one gathered fewer candidates per source and did not widen."""
    summary: Summary | None = None
    """What the candidates left out for lack of room come to, in a section of the render's
    own (``AssemblerConfig.summary``); ``None`` when the build made none: summaries are off,
    nothing was left out for lack of room, or the budget leaves too little room for one."""

    @property
    def items(self) -> tuple[ContextItem, ...]:
        """The chosen items, in prompt order."""
        return tuple(selection.item for selection in self.selections)

    @property
    def paged_in(self) -> tuple[Selection, ...]:
        """The selections paged in from the archive, in prompt order."""
        return tuple(selection for selection in self.selections if selection.from_archive)

    @property
    def tokens_used(self) -> int:
        """Tokens the rendered package costs (headers and summary included): the counter's count."""
        summary = self.summary.tokens if self.summary is not None else 0
        return sum(usage.used for usage in self.usage) + summary

    @property
    def compression_ratio(self) -> float:
        """Tokens used over the tokens of every candidate considered (1.0: nothing left out)."""
        return self.tokens_used / self.candidate_tokens if self.candidate_tokens else 1.0

    @property
    def pressure(self) -> MemoryPressure:
        """Which tiers filled their budget and what they paged out (:mod:`.pressure`)."""
        return MemoryPressure.of(self)

    def usage_of(self, tier: Tier) -> TierUsage:
        """The budget use of one tier (nothing, for a session the task does not run in)."""
        found = next((usage for usage in self.usage if usage.tier is tier), None)
        return found if found is not None else TierUsage(Tier(tier), 0, 0, 0, 0)

    def render(self, format: RenderFormat | str | None = None) -> str:  # noqa: A002 - the natural name
        """The prompt block; the budget holds for the format the package was built with."""
        layout = (
            self.layout
            if format is None
            else attrs.evolve(self.layout, format=RenderFormat(format))
        )
        lines = [Line(s.item, s.tier, s.body) for s in self.selections]
        return render_lines(lines, layout, self.summary.text if self.summary is not None else "")
