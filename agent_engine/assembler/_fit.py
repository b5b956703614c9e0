"""The render safety net, for token counters whose counts may not add up.

With the default counter the packer's units are what the render costs, so there is nothing to
check. Any other counter (a model's tokenizer merges across line breaks, say) is asked for the
whole render; while it is over the budget the lowest-scored ranked item is dropped.
"""

from __future__ import annotations

from agent_engine.assembler.package import OmissionReason
from agent_engine.assembler.packer import PROTECTED, Packer
from agent_engine.assembler.render import PROMPT_ORDER, Layout, Line, render_lines
from agent_engine.models import Tier
from agent_engine.tokens import TokenCounter

__all__ = ["fit_render"]


def fit_render(
    packer: Packer, budget: int, layout: Layout, counter: TokenCounter
) -> dict[Tier, int] | None:
    """Make the render fit ``budget``; each tier's part of its count when not what was charged.

    Returns ``None`` when the render costs what the packer charged (always so with an exact
    counter), else each tier's part of the rendered count.
    """
    if packer.scale.exact:
        return None
    while True:
        lines = packer.lines()
        rendered = counter.count(render_lines(lines, layout))
        if rendered <= budget or not packer.taken:
            break
        ranked = [t for t in packer.taken if t.entry.reason not in PROTECTED]
        victim = min(
            ranked or packer.taken, key=lambda t: (packer.score_of(t.entry), t.entry.item.id)
        )
        packer.drop(victim, OmissionReason.LOWER_SCORE)
    if rendered == packer.scale.tokens(packer.total):
        return None
    return _parts(lines, rendered, layout, counter)


def _parts(
    lines: list[Line], rendered: int, layout: Layout, counter: TokenCounter
) -> dict[Tier, int]:
    """A tier's part: the render up to the end of its section, less the render before it."""
    parts = dict.fromkeys(Tier, 0)
    shown: list[Line] = []
    before = 0
    last = next(tier for tier in reversed(PROMPT_ORDER) if tier in {x.tier for x in lines})
    for tier in PROMPT_ORDER:
        mine = [line for line in lines if line.tier is tier]
        if not mine:
            continue
        shown += mine
        after = rendered if tier is last else counter.count(render_lines(shown, layout))
        parts[tier], before = after - before, after
    return parts
