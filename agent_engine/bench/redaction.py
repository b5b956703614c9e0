"""How well redaction finds secrets, and how rarely it flags what is not one.

Three sets of text, all made or read here:

- **Secrets**: for each kind, ``per_kind`` fake secrets shaped as the provider issues them
  (prefixes, lengths, alphabets; random bodies from a seeded generator, so none is real),
  each set in a line of the kind people paste them in: prose, an environment file, JSON, a
  command line, a log line, a quoted string. A secret is *found* when the findings cover it
  entirely (what masking needs), *named* when a finding of its own kind does.
- **Conversation**: every turn of the LoCoMo conversations. Any finding there is a false
  positive (the data holds no secrets); the target is under 0.5% of turns.
- **Technical text**: lines an agent's memory is full of that hold no secret but look like
  one to a careless detector: commit hashes, UUIDs, paths, URLs, version strings, IP
  addresses, timestamps, base64 of ordinary words, identifiers.

Run it with ``agent-engine bench redaction`` (``docs/benchmarks.md``).
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from agent_engine.models import ContextItem
from agent_engine.redaction import RedactionPolicy

__all__ = ["KINDS", "RedactionBenchConfig", "fake_secrets", "run_redaction", "table"]

_ALNUM = string.ascii_letters + string.digits
_URLSAFE = _ALNUM + "_-"
_B64 = _ALNUM + "+/"


@attrs.frozen
class RedactionBenchConfig:
    """Fake secrets per kind, and the seed they are drawn with."""

    per_kind: int = 200
    seed: int = 0


@attrs.frozen
class Planted:
    """A fake secret of ``kind`` at ``text[start:end]``."""

    kind: str
    text: str
    start: int
    end: int


def _random(rng: random.Random, alphabet: str, size: int) -> str:
    return "".join(rng.choices(alphabet, k=size))


def _b64url(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


def _jwt(rng: random.Random) -> str:
    header = {"alg": rng.choice(["HS256", "RS256", "ES256"]), "typ": "JWT"}
    payload = {"sub": str(rng.randint(1, 10**9)), "iat": rng.randint(1_600_000_000, 1_800_000_000)}
    if rng.random() < 0.5:  # noqa: PLR2004
        payload["name"] = rng.choice(["Ana Lima", "Bo Chen", "Kofi Mensah"])
    return f"{_b64url(header)}.{_b64url(payload)}.{_random(rng, _URLSAFE, rng.choice([43, 86]))}"


def _private_key(rng: random.Random) -> str:
    label = rng.choice(["RSA PRIVATE KEY", "PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY"])
    lines = [_random(rng, _B64, 64) for _ in range(rng.randint(3, 12))]
    return f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----"


def _password(rng: random.Random) -> str:
    return _random(rng, _ALNUM + "!#$%^&*~", rng.randint(8, 24))


def _connection(rng: random.Random) -> tuple[str, str]:
    """A connection string and the password in it."""
    password = _password(rng)
    user = rng.choice(["admin", "app", "postgres", "svc_reader", "root"])
    host = rng.choice(["db.internal", "10.0.3.12", "prod-db.example.com", "localhost"])
    if rng.random() < 0.25:  # noqa: PLR2004 - key=value style
        return f"Server={host};Database=orders;User Id={user};Password={password};", password
    scheme = rng.choice(["postgresql", "postgres", "mysql", "mongodb+srv", "redis", "amqp"])
    return f"{scheme}://{user}:{password}@{host}:{rng.randint(1000, 9999)}/main", password


def _email(rng: random.Random) -> str:
    first = rng.choice(["jane", "omar", "li", "maria", "k", "dev-team", "a.b"])
    last = rng.choice(["doe", "haddad", "wei", "garcia", "smith", "ops"])
    domain = rng.choice(["example.com", "mail.example.org", "corp.example.co.uk", "example.io"])
    sep = rng.choice([".", "_", "", "+"])
    return f"{first}{sep}{last}{rng.choice(['', str(rng.randint(1, 99))])}@{domain}"


def _phone(rng: random.Random) -> str:
    def digits(n: int) -> str:
        return _random(rng, string.digits, n)

    area = f"{rng.randint(2, 9)}{digits(2)}"
    return rng.choice(
        [
            f"({area}) {rng.randint(2, 9)}{digits(2)}-{digits(4)}",
            f"{area}-{rng.randint(2, 9)}{digits(2)}-{digits(4)}",
            f"{area}.{rng.randint(2, 9)}{digits(2)}.{digits(4)}",
            f"{area} {rng.randint(2, 9)}{digits(2)} {digits(4)}",
            f"+1 {area} {rng.randint(2, 9)}{digits(2)} {digits(4)}",
            f"+44 20 {digits(4)} {digits(4)}",
            f"+49 30 {digits(8)}",
            f"+33 6 {digits(2)} {digits(2)} {digits(2)} {digits(2)}",
            f"+91 {rng.randint(6, 9)}{digits(4)} {digits(5)}",
            f"07{digits(3)} {digits(6)}",
        ]
    )


_MAKERS: dict[str, Callable[[random.Random], str]] = {
    "openai_api_key": lambda rng: (
        rng.choice(["sk-", "sk-proj-", "sk-svcacct-"])
        + _random(rng, _URLSAFE, rng.choice([48, 64, 120]))
    ),
    "anthropic_api_key": lambda rng: "sk-ant-api03-" + _random(rng, _URLSAFE, 93) + "AA",
    "google_api_key": lambda rng: "AIza" + _random(rng, _URLSAFE, 35),
    "stripe_api_key": lambda rng: (
        rng.choice(["sk_live_", "sk_test_", "rk_live_"])
        + _random(rng, _ALNUM, rng.choice([24, 99]))
    ),
    "slack_token": lambda rng: (
        rng.choice(["xoxb-", "xoxp-"])
        + f"{rng.randint(10**10, 10**12)}-{rng.randint(10**10, 10**12)}-{_random(rng, _ALNUM, 24)}"
    ),
    "huggingface_token": lambda rng: "hf_" + _random(rng, _ALNUM, 34),
    "github_token": lambda rng: rng.choice(
        [
            rng.choice(["ghp_", "gho_", "ghs_", "ghu_"]) + _random(rng, _ALNUM, 36),
            "github_pat_" + _random(rng, _ALNUM, 22) + "_" + _random(rng, _ALNUM, 59),
        ]
    ),
    "gitlab_token": lambda rng: "glpat-" + _random(rng, _URLSAFE, 20),
    "aws_access_key": lambda rng: (
        rng.choice(["AKIA", "ASIA"]) + _random(rng, string.ascii_uppercase + string.digits, 16)
    ),
    "jwt": _jwt,
    "private_key": _private_key,
    "email": _email,
    "phone": _phone,
    "high_entropy": lambda rng: _random(
        rng, rng.choice([_ALNUM, _B64, _URLSAFE]), rng.randint(20, 64)
    ),
}

_TEMPLATES = (
    "here is the key: {s}",
    "export {var}={s}",
    '{{"{var}": "{s}", "region": "eu-west-1"}}',
    "curl -H 'Authorization: Bearer {s}' https://api.example.com/v1/items",
    "2026-03-02T10:14:07Z WARN auth failed for token={s} (retrying)",
    "I pasted {s} into the config by mistake, can you rotate it?",
    '{var} = "{s}"',
    "The value was {s}.",
)
_PERSONAL = (
    "You can reach me at {s} after five.",
    "contact: {s}",
    "Please send the invoice to {s}, thanks!",
    "Her details are {s} (work).",
    "Sam <{s}> wrote back",
    "{s}",
    "My number is {s} if anything breaks.",
)

KINDS = (*_MAKERS, "aws_secret_key", "connection_string")
"""Every kind the secret set plants."""


def fake_secrets(config: RedactionBenchConfig) -> list[Planted]:
    """``per_kind`` lines for each kind of :data:`KINDS`, each holding one fake secret."""
    rng = random.Random(config.seed)  # noqa: S311 - fake secrets, never real ones
    return [_plant(rng, kind) for kind in KINDS for _ in range(config.per_kind)]


def _plant(rng: random.Random, kind: str) -> Planted:
    var = rng.choice(["API_KEY", "TOKEN", "SECRET", "auth", "key"])
    if kind == "aws_secret_key":
        secret = _random(rng, _B64, 40)
        line = rng.choice(
            [
                "aws_secret_access_key = {s}",
                "AWS_SECRET_ACCESS_KEY={s}",
                '"aws_secret_access_key": "{s}"',
                "export AWS_SECRET_KEY={s}",
            ]
        )
        return _placed(kind, line, secret)
    if kind == "connection_string":
        text, password = _connection(rng)
        line = rng.choice(["DATABASE_URL={s}", "connecting to {s} failed: timeout", "{s}"])
        full = line.replace("{s}", text)
        start = full.index(password)
        return Planted(kind, full, start, start + len(password))
    secret = _MAKERS[kind](rng)
    templates = _PERSONAL if kind in {"email", "phone"} else _TEMPLATES
    return _placed(kind, rng.choice(templates).replace("{var}", var), secret)


def _placed(kind: str, template: str, secret: str) -> Planted:
    text = template.replace("{{", "{").replace("}}", "}").replace("{s}", secret)
    start = text.index(secret)
    return Planted(kind, text, start, start + len(secret))


TECHNICAL = (
    "merged 3f9c2e1b7a4d5c6e8f0a1b2c3d4e5f6a7b8c9d0e into main",
    "commit 9fceb02d0ae598e95dc970b74767f19372d61af8 fixed the flaky test",
    "request id 123e4567-e89b-12d3-a456-426614174000 timed out after 30s",
    "see /usr/local/lib/python3.11/site-packages/sqlalchemy/engine/base.py line 1967",
    "docs at https://docs.example.com/en/latest/reference/configuration.html#statement-timeout",
    "upgraded numpy from 1.26.4 to 2.1.3 and torch to 2.13.0+cpu",
    "the server at 192.168.10.24:8080 answered 503 at 2026-11-28T03:14:24.518Z",
    "build 20261128.4 passed in 14m 32s on runner ubuntu-22.04-x64-large",
    "base64 of hello world is aGVsbG8gd29ybGQ=",
    "ContextAssemblerConfigurationValidationError raised by build_context_for_task_step",
    "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 is the empty digest",
    "the job ran from 09:30 to 17:45 on 2026-11-27 and again on 2026-11-28",
    "image tag registry.example.com/team/agent-engine:v0.9.3-rc.2",
    "set max_connections=200 and shared_buffers=4GB in postgresql.conf",
    "order #4815162342 shipped; tracking 1Z999AA10123456784",
    "call the deploy_preview_environment_for_branch function with retries=3",
    "the p95 build time fell from 35.8 ms to 14.2 ms at 1,000,000 items",
    "S3 bucket agent-engine-bench-results-2026 holds the reports",
    "the password must be at least 12 characters long",
    "use the token from the vault, never paste it in chat",
    "python -m pytest -q -x tests/unit/test_bm25.py::TestRankingDepth -k floor",
    "version string 2.14.1+cu121.post3.dev20261101 broke the wheel",
    "meeting moved to 3pm, room 4.12, dial-in code 55 21 90",
    "the model all-MiniLM-L6-v2 embeds 384 dimensions",
    "np.float64(0.8274917364528173) was the recall within 1024 tokens",
    "XMLHttpRequestUploadProgressEvent fired twice in getUserAccountSettingsHandler2",
    "renamed ContextAssemblerConfigurationValidationError to AssemblerConfigError",
)
"""Lines of an agent's memory with no secret in them."""


def _share_flagged(texts: Iterable[str], policy: RedactionPolicy) -> tuple[int, Counter[str]]:
    total, kinds = 0, Counter[str]()
    for text in texts:
        total += 1
        findings = policy.find(text)
        kinds.update({finding.kind for finding in findings})
        if findings:
            kinds["(lines)"] += 1
    return total, kinds


def run_redaction(
    config: RedactionBenchConfig, conversation: Iterable[ContextItem]
) -> dict[str, Any]:
    """Recall per kind on the fake secrets; shares flagged of conversation and technical text."""
    policy = RedactionPolicy()
    per_kind: dict[str, dict[str, int]] = {
        kind: {"planted": 0, "found": 0, "named": 0} for kind in KINDS
    }
    missed: list[str] = []
    for planted in fake_secrets(config):
        counts = per_kind[planted.kind]
        counts["planted"] += 1
        findings = policy.find(planted.text)
        covering = [f for f in findings if f.start < planted.end and f.end > planted.start]
        covered = set().union(*(range(f.start, f.end) for f in covering)) if covering else set()
        if covered >= set(range(planted.start, planted.end)):
            counts["found"] += 1
        elif len(missed) < 20:  # noqa: PLR2004 - a sample for the report
            missed.append(f"{planted.kind}: {planted.text[:120]}")
        if any(
            f.kind == planted.kind and f.start <= planted.start and f.end >= planted.end
            for f in covering
        ):
            counts["named"] += 1
    turns, turn_kinds = _share_flagged((item.text for item in conversation), policy)
    lines, line_kinds = _share_flagged(TECHNICAL, policy)
    return {
        "config": attrs.asdict(config),
        "secrets": per_kind,
        "missed_sample": missed,
        "conversation": {"turns": turns, "flagged": dict(turn_kinds)},
        "technical": {"lines": lines, "flagged": dict(line_kinds)},
    }


def table(results: dict[str, Any]) -> list[str]:
    """Markdown tables of :func:`run_redaction`'s results."""
    lines = [
        "| kind | planted | found (covered) | named as its kind |",
        "|---|---:|---:|---:|",
    ]
    for kind, counts in results["secrets"].items():
        planted = max(counts["planted"], 1)
        lines.append(
            f"| {kind} | {counts['planted']} | {counts['found'] / planted:.3f} "
            f"| {counts['named'] / planted:.3f} |"
        )
    lines += [
        "",
        "| text without secrets | lines | flagged | share | kinds flagged |",
        "|---|---:|---:|---:|---|",
        _clean_row(
            "conversation (LoCoMo turns)",
            results["conversation"]["turns"],
            results["conversation"]["flagged"],
        ),
        _clean_row(
            "technical lines", results["technical"]["lines"], results["technical"]["flagged"]
        ),
    ]
    return lines


def _clean_row(name: str, total: int, flagged: dict[str, int]) -> str:
    lines = flagged.get("(lines)", 0)
    return f"| {name} | {total} | {lines} | {lines / max(total, 1):.4f} | {_kinds(flagged)} |"


def _kinds(flagged: dict[str, int]) -> str:
    named = {kind: n for kind, n in flagged.items() if kind != "(lines)"}
    return ", ".join(f"{kind} {n}" for kind, n in sorted(named.items())) or "-"
