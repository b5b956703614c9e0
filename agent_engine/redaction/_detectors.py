"""What counts as a secret or personal data in text: one detector per kind.

Each detector is a pattern (and, where a pattern alone would flag ordinary text, a check of
what it matched) for one kind. The patterns are anchored on what providers put in their
credentials on purpose (``ghp_``, ``AKIA``, ``sk-ant-``, ``-----BEGIN ... PRIVATE KEY-----``),
so they find keys wherever they stand and almost never fire on conversation. Two kinds have no
such anchor and are where false positives come from: phone numbers (a pattern needs the
separators or the ``+`` people write numbers with, or a word such as "call" or "phone" just
before) and opaque strings, which the entropy detector finds by how random they look.

A detector reports the span of the secret itself: of a connection string, the password, so a
masked URL still says which database it named.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator

import attrs

__all__ = ["DEFAULT_DETECTORS", "Detector", "Finding", "shannon_entropy"]


@attrs.frozen
class Finding:
    """One secret found in a text: its kind and where it is (``text[start:end]``)."""

    kind: str
    start: int
    end: int


@attrs.frozen
class Detector:
    """Finds one kind of secret: ``pattern``'s matches that ``accept`` takes (all, without it).

    A pattern with a group named ``secret`` reports that group's span, not the whole match.

    ``priority`` decides between overlapping findings: the higher wins, so a specific kind
    (a GitHub token) is reported as itself rather than as a random-looking string.
    """

    kind: str
    pattern: re.Pattern[str]
    accept: Callable[[str], bool] | None = None
    priority: int = 10
    needs: tuple[str, ...] = ()
    """Strings one of which every match holds (a prefix, an ``@``, a digit), looked for first
    (in ``text.lower()`` when ``folded``): most texts hold no secret, and ``in`` costs a
    fraction of a pattern's search."""
    folded: bool = False

    def find(self, text: str) -> Iterator[Finding]:
        """Every finding of this kind in ``text``."""
        if self.needs:
            haystack = text.lower() if self.folded else text
            if not any(needle in haystack for needle in self.needs):
                return
        secret = "secret" in self.pattern.groupindex
        for match in self.pattern.finditer(text):
            start, end = match.span("secret") if secret else match.span()
            if start < end and (self.accept is None or self.accept(text[start:end])):
                yield Finding(self.kind, start, end)


def shannon_entropy(text: str) -> float:
    """Bits per character of ``text``'s own character frequencies (0 for an empty text)."""
    if not text:
        return 0.0
    counts = Counter(text).values()
    size = len(text)
    return -sum(n / size * math.log2(n / size) for n in counts)


ENTROPY_MIN_LENGTH = 20
"""Shortest string the entropy detector judges (seed 001: strings over 20 characters)."""
ENTROPY_BITS = 4.0
"""Bits per character above which a long enough string looks random (seed 001). A string of
``n`` distinct characters holds at most ``log2(n)`` bits each, which for 20-24 characters is
barely above 4: there the bar is 90% of that maximum, so a random key of that length passes
as one of 40 does."""


def _looks_random(token: str) -> bool:
    """A long token of near-uniform characters: letters with digits, or case changing often.

    Words, numbers and identifiers are not keys however long: a random key has digits, or
    (a short one, now and then) none but changes case every third character or so, where a
    ``CamelCaseName`` changes case once a word.
    """
    letters = sum(c.isalpha() for c in token)
    if letters < 2:  # noqa: PLR2004
        return False
    if not any(c.isdigit() for c in token):
        changes = sum(
            a.isupper() != b.isupper()
            for a, b in itertools.pairwise(token)
            if a.isalpha() and b.isalpha()
        )
        if changes < 0.3 * len(token):
            return False
    bar = min(ENTROPY_BITS, 0.9 * math.log2(len(token)))
    return shannon_entropy(token) > bar


def _enough_digits(low: int, high: int) -> Callable[[str], bool]:
    def accept(number: str) -> bool:
        return low <= sum(c.isdigit() for c in number) <= high

    return accept


def _compiled(pattern: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(pattern, flags | re.VERBOSE)


_GITLAB = ("pat", "ptt", "dt", "rt", "cbt", "imt", "oas", "ft", "soat", "agent")
"""GitLab's token prefixes, after ``gl`` and before ``-``."""
_TOKEN_END = r"(?![A-Za-z0-9_\-])"  # noqa: S105 - a pattern, not a password

DEFAULT_DETECTORS: tuple[Detector, ...] = (
    Detector(
        "private_key",
        _compiled(
            r"-----BEGIN[ A-Z0-9]*PRIVATE\ KEY(?:\ BLOCK)?-----"
            r"(?:.*?-----END[ A-Z0-9]*PRIVATE\ KEY(?:\ BLOCK)?-----|.*\Z)",
            re.DOTALL,
        ),
        needs=("PRIVATE KEY",),
        priority=50,
    ),
    Detector(
        "jwt",
        _compiled(
            r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*"
            + _TOKEN_END
        ),
        needs=("eyJ",),
        priority=40,
    ),
    Detector(
        "aws_access_key",
        _compiled(
            r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|AIPA)[A-Z0-9]{16}(?![A-Z0-9])"
        ),
        needs=("AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "ANPA", "AIPA"),
        priority=40,
    ),
    Detector(
        "aws_secret_key",
        _compiled(
            r"(?i:aws[\w\-. ]{0,20}?(?:secret|private)[\w\-. ]{0,20}?)"
            r"[\"']?\s*[:=]\s*[\"']?(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"
        ),
        needs=("aws",),
        folded=True,
        priority=40,
    ),
    Detector(
        "github_token",
        _compiled(
            r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})"
            + _TOKEN_END
        ),
        needs=("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        priority=40,
    ),
    Detector(
        "gitlab_token",
        _compiled(
            rf"(?<![A-Za-z0-9_\-])gl(?:{'|'.join(_GITLAB)})-[A-Za-z0-9_\-]{{20,}}" + _TOKEN_END
        ),
        needs=tuple(f"gl{kind}-" for kind in _GITLAB),
        priority=40,
    ),
    Detector(
        "anthropic_api_key",
        _compiled(r"(?<![A-Za-z0-9_\-])sk-ant-[A-Za-z0-9_\-]{20,}" + _TOKEN_END),
        needs=("sk-ant-",),
        priority=45,
    ),
    Detector(
        "openai_api_key",
        _compiled(
            r"(?<![A-Za-z0-9_\-])sk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"
            + _TOKEN_END
        ),
        accept=lambda key: any(c.isdigit() for c in key),
        needs=("sk-",),
        priority=40,
    ),
    Detector(
        "google_api_key",
        _compiled(r"(?<![A-Za-z0-9_\-])AIza[0-9A-Za-z_\-]{35}" + _TOKEN_END),
        needs=("AIza",),
        priority=40,
    ),
    Detector(
        "stripe_api_key",
        _compiled(r"(?<![A-Za-z0-9_])(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}" + _TOKEN_END),
        needs=("_live_", "_test_"),
        priority=40,
    ),
    Detector(
        "slack_token",
        _compiled(
            r"(?<![A-Za-z0-9_\-])xox[abposr]-[0-9A-Za-z\-]{10,}"
            + _TOKEN_END
            + r"|https://hooks\.slack\.com/services/T[A-Z0-9]+/B[A-Z0-9]+/[A-Za-z0-9]+"
        ),
        needs=("xox", "hooks.slack"),
        priority=40,
    ),
    Detector(
        "huggingface_token",
        _compiled(r"(?<![A-Za-z0-9_])hf_[A-Za-z0-9]{34,}" + _TOKEN_END),
        needs=("hf_",),
        priority=40,
    ),
    Detector(
        "sendgrid_api_key",
        _compiled(r"(?<![A-Za-z0-9_])SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}" + _TOKEN_END),
        needs=("SG.",),
        priority=40,
    ),
    Detector(
        "npm_token",
        _compiled(r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36}" + _TOKEN_END),
        needs=("npm_",),
        priority=40,
    ),
    Detector(
        "connection_string",
        _compiled(
            # scheme://user:password@host: the password (not the user, host or database).
            r"\b[a-zA-Z][a-zA-Z0-9+.\-]{1,30}://[^\s:/@'\"]+:(?P<secret>[^\s@/'\"]+)@[^\s/'\"]+"
        ),
        needs=("://",),
        priority=35,
    ),
    Detector(
        "connection_string",
        _compiled(
            # key=value connection strings (ADO.NET, ODBC, libpq): Password=...; or pwd=...
            r"(?i:(?<![A-Za-z])(?:password|pwd)\s*=\s*)(?P<secret>[^\s;'\"]{3,})"
            r"(?=\s*(?:;|$|\s+\w+\s*=))"
        ),
        needs=("password", "pwd"),
        folded=True,
        priority=35,
    ),
    Detector(
        "email",
        _compiled(
            r"(?<![A-Za-z0-9._%+\-])[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*"
            r"\.[A-Za-z]{2,}(?![A-Za-z0-9\-])"
        ),
        needs=("@",),
        priority=30,
    ),
    Detector(
        "phone",
        _compiled(
            r"(?<![\w+])\+[1-9]\d{0,2}(?:[\s.\-]?\(?\d{1,4}\)?){2,5}(?![\w])"  # +44 20 7946 0958
            r"|(?<![\w(])\(\d{3}\)\s?\d{3}[\s.\-]\d{4}(?!\w)"  # (415) 555-0123
            r"|(?<![\w.\-])[2-9]\d{2}([.\-\ ])\d{3}\1\d{4}(?![\w.\-])"  # 415-555-0123, 415 555 0123
            r"|(?<![\w.\-])0\d{2,4}\ \d{3,4}\ ?\d{3,4}(?![\w.\-])"  # 020 7946 0958, 07700 900123
        ),
        accept=_enough_digits(7, 15),
        needs=tuple("0123456789"),
        priority=20,
    ),
    Detector(
        "phone",
        _compiled(
            r"(?i:\b(?:phone|tel|telephone|mobile|cell|call\ me\ at|text\ me\ at|whatsapp)\b)"
            r"[^\d+\n]{0,15}(?P<secret>\+?\d[\d\ ().\-]{5,18}\d)(?![\w])"
        ),
        accept=_enough_digits(7, 15),
        needs=("phone", "tel", "mobile", "cell", "call", "text", "whatsapp"),
        folded=True,
        priority=20,
    ),
    Detector(
        "high_entropy",
        _compiled(
            rf"(?<![A-Za-z0-9+/=_\-])[A-Za-z0-9+/=_\-]{{{ENTROPY_MIN_LENGTH},}}"
            r"(?![A-Za-z0-9+/=_\-])"
        ),
        accept=_looks_random,
        priority=0,
    ),
)
"""The detectors a :class:`~agent_engine.redaction.RedactionPolicy` uses unless given others:
provider keys and tokens, AWS keys, JWTs, private keys, connection-string passwords, e-mail
addresses, phone numbers, and long random-looking strings."""
