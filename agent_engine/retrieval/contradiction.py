"""Whether two short statements likely contradict each other, from their words alone.

A memory store adds an item next to tens of older ones; before wiring anything that reacts, it
needs a cheap, deterministic signal that a new statement says the opposite of an old one. This
module gives that signal without a model:

1. **Polarity.** Each statement's polarity is the parity of its negative cues: negations
   (``not``, ``no``, ``never``, ``n't`` contractions, ``no longer``, ``anymore``) and the
   negative side of an opposition pair (``avoid``, ``disable``, ``remove``, ``forbid``,
   ``stop``, ``off``, ...). Two negatives cancel, so "never disable X" agrees with "always
   keep X enabled". Two statements can contradict only if their polarities differ.
2. **Same subject.** Cue words and stopwords are dropped and the rest light-stemmed (the
   analysis BM25 uses, :mod:`agent_engine.retrieval.text`). The statements are about the same
   thing when the shared terms cover at least :data:`MIN_OVERLAP` of the shorter statement's
   terms (the overlap coefficient). Measuring against the shorter one lets "we no longer use
   Postgres" contradict "we use Postgres for the main database"; requiring four fifths keeps
   "Jo is allergic to bees" apart from "Jo is not allergic to wasps".

What it cannot see: contradictions by a swapped value ("tabs" vs "spaces", "Go" vs "Rust")
carry no cue, and a paraphrase that negates with other words ("is vegetarian" vs "eats meat")
shares too few terms. Both cost recall; neither costs precision. The rules were written on
one half of ``tests/data/contradictions.jsonl`` and measured on the other (see the tests).
"""

from __future__ import annotations

import functools
from typing import Final

from attrs import frozen

from agent_engine import _validate
from agent_engine.retrieval.text import STOPWORDS, light_stem, words

__all__ = ["MIN_OVERLAP", "Contradiction", "contradicts"]

MIN_OVERLAP: Final = 0.8
"""The share of the shorter statement's content terms the other must hold to be "the same thing".

Measured on the tuning half of the labelled pairs: at 0.75 "use ruff for linting Python code"
contradicts "don't use ruff for formatting Python code" (three of four terms shared), at 0.67
"Jo is allergic to bees" contradicts "Jo is not allergic to wasps"; at 0.8 a statement of four
terms or fewer must be wholly contained in the other, and a longer one may differ in one term
in five. Details added to the longer statement never count against it.
"""

NEGATION: Final = "negation"
"""The cue reported when the statements differ by a negation rather than an opposition pair."""

# Each line: the lemma, its sign (+ keeps polarity, - flips it), then its surface forms.
_CUE_TEXT: Final = """
always + always
never - never
use + use uses used using
avoid - avoid avoids avoided avoiding
prefer + prefer prefers preferred preferring
enable + enable enables enabled enabling
disable - disable disables disabled disabling
add + add adds added adding
remove - remove removes removed removing
delete - delete deletes deleted deleting
keep + keep keeps kept keeping
allow + allow allows allowed allowing permit permits permitted
forbid - forbid forbids forbade forbidden forbidding prohibit prohibits prohibited
disallow - disallow disallows disallowed ban bans banned
include + include includes included including
exclude - exclude excludes excluded excluding
accept + accept accepts accepted accepting
reject - reject rejects rejected rejecting
like + like likes liked love loves loved
dislike - dislike dislikes disliked hate hates hated
start + start starts started starting
stop - stop stops stopped stopping quit quits
true + true
false - false
on + on
off - off
required + required mandatory
optional - optional
should + should must
do + do does did
not - not no nor cannot dont doesnt didnt isnt arent wasnt werent cant wont shouldnt
not - wouldnt couldnt havent hasnt hadnt mustnt neednt aint
"""

_PAIRS: Final = (
    ("always", "never"),
    ("use", "avoid"),
    ("prefer", "avoid"),
    ("enable", "disable"),
    ("add", "remove"),
    ("add", "delete"),
    ("keep", "remove"),
    ("keep", "delete"),
    ("allow", "forbid"),
    ("allow", "disallow"),
    ("include", "exclude"),
    ("accept", "reject"),
    ("like", "dislike"),
    ("prefer", "dislike"),
    ("use", "stop"),
    ("start", "stop"),
    ("true", "false"),
    ("on", "off"),
    ("required", "optional"),
)
"""Opposition pairs reported by name (positive, negative) when one side has each word."""

_AFTER_NEGATION: Final = frozenset({"longer", "anymore", "more"})
"""Words that only complete a negation ("no longer", "not anymore", "no more")."""


def _cue_table() -> dict[str, tuple[str, bool]]:
    table: dict[str, tuple[str, bool]] = {}
    for line in _CUE_TEXT.strip().splitlines():
        lemma, sign, *forms = line.split()
        for form in forms:
            table[form] = (lemma, sign == "-")
    return table


_CUES: Final = _cue_table()


@frozen
class Contradiction:
    """Why two statements look contradictory: the cue that differs and what both are about.

    ``cue`` is an opposition pair written ``"positive/negative"`` (``"always/never"``,
    ``"enable/disable"``) when one statement holds each side, else :data:`NEGATION`.
    ``shared`` holds the stemmed content terms both statements share (sorted), and
    ``overlap`` their share of the shorter statement's terms, at least :data:`MIN_OVERLAP`.
    """

    cue: str
    shared: tuple[str, ...]
    overlap: float


@frozen
class _Reading:
    """One statement split into its cues (lemmas), its polarity and its content terms."""

    cues: frozenset[str]
    negative: bool
    terms: frozenset[str]


def _term(word: str) -> str:
    """The comparable form of a content word: light-stemmed, without a final ``e``.

    The stemmer leaves ``smokes`` as ``smoke`` but makes ``smoking`` ``smok``; dropping the
    ``e`` lets the two meet.
    """
    stem = light_stem(word)
    return stem[:-1] if len(stem) > 3 and stem.endswith("e") else stem  # noqa: PLR2004


@functools.lru_cache(maxsize=4096)
def _read(text: str) -> _Reading:
    """Read one statement; cached, since one new item is checked against many old ones."""
    cues: set[str] = set()
    negative = False
    terms: set[str] = set()
    previous = ""
    for word in words(text):
        if previous in {"not", "no", "any"} and word in _AFTER_NEGATION:
            previous = word
            continue
        if previous == "not" and word == "only":
            negative = not negative  # "not only" asserts; undo the flip "not" made
            cues.discard("not")
            previous = word
            continue
        previous = word
        cue = _CUES.get(word)
        if cue is None and word.endswith("n't"):
            cue = ("not", True)
        if cue is not None:
            lemma, flips = cue
            cues.add(lemma)
            negative ^= flips
            continue
        if word in STOPWORDS or word.split("'", 1)[0] in STOPWORDS:
            continue
        terms.add(_term(word.split("'", 1)[0]))
    return _Reading(frozenset(cues), negative, frozenset(terms))


def _cue(first: _Reading, second: _Reading) -> str:
    """Name the opposition pair split between the statements, else ``negation``.

    The negative word must be in one statement only and its positive in the other, which may
    hold it too: "we stopped using Jenkins" against "we use Jenkins" is ``use/stop``.
    """
    for one, other in ((first, second), (second, first)):
        only = one.cues - other.cues
        for positive, negative in _PAIRS:
            if negative in only and positive in other.cues:
                return f"{positive}/{negative}"
    return NEGATION


def contradicts(a: str, b: str) -> Contradiction | None:
    """Whether ``a`` and ``b`` likely contradict: the reason if so, else ``None``.

    They must be about the same thing (shared content terms cover :data:`MIN_OVERLAP` of the
    shorter one's) and have opposite polarity: one negates, or holds the negative side of an
    opposition pair, where the other does not. Symmetric in its arguments, deterministic, and
    cheap enough to run against every candidate of an add.

    Raises:
        ValidationError: ``a`` or ``b`` is not a string (or holds a NUL character).
    """
    first = _read(_validate.text("a", a))
    second = _read(_validate.text("b", b))
    if first.negative == second.negative:
        return None
    shared = first.terms & second.terms
    if not shared:
        return None
    overlap = len(shared) / min(len(first.terms), len(second.terms))
    if overlap < MIN_OVERLAP:
        return None
    return Contradiction(cue=_cue(first, second), shared=tuple(sorted(shared)), overlap=overlap)
