"""The packer's unit of account: counts that add up to exactly what a render costs.

The default counter counts a text's pieces (words, digit runs, symbols), multiplies by a
margin (11/10) and rounds up. Rounding every piece of a package up (a header, a line's markup,
a body) would charge up to a token per piece more than the render costs, so an item whose
render costs exactly the budget would not fit. The packer adds pieces *before* the margin
instead: a text's units are ``floor(count / margin)``, which gives back its piece count
exactly (``ceil(margin * n)`` grows by at least one with each piece), and a package of ``U``
units costs ``ceil(margin * U)`` tokens. No counted piece spans the newline between two blocks
of a render, the space after a line's label, or the ``>``/``<`` around an XML body, so the
units of a render are the sum of the units of its pieces, and the count is exact.

Any other counter is charged its counts as they are (a margin of 1). The protocol asks such
a counter to count a concatenation at most as the sum of its pieces; the assembler counts
those packages whole at the end and reports that count.
"""

from __future__ import annotations

from fractions import Fraction

import attrs

from agent_engine.tokens import DEFAULT_COUNTER, TokenCounter

__all__ = ["CostScale", "scale_of"]


@attrs.frozen
class CostScale:
    """How a counter's counts turn into units that add up, and units back into tokens."""

    margin: Fraction
    exact: bool
    """Whether the units of a render are exactly the sum of its pieces' units."""
    cached_costs: bool
    """Whether ``ContextItem.token_cost`` (written with the default counter) is this counter's."""

    def units(self, tokens: int) -> int:
        """The units of a text the counter counted ``tokens`` (or of a budget of ``tokens``).

        ``ceil(margin * units) <= tokens`` exactly when ``units <= units(tokens)``.
        """
        return tokens * self.margin.denominator // self.margin.numerator

    def tokens(self, units: int) -> int:
        """What ``units`` cost, as the counter counts them in one text."""
        return -(-units * self.margin.numerator // self.margin.denominator)


_EXACT = CostScale(DEFAULT_COUNTER.margin, exact=True, cached_costs=True)
_AS_COUNTED = CostScale(Fraction(1), exact=False, cached_costs=False)


def scale_of(counter: TokenCounter) -> CostScale:
    """The scale of ``counter``: exact for the default counter's method (known by its name)."""
    return _EXACT if counter.name == DEFAULT_COUNTER.name else _AS_COUNTED
