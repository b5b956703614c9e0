"""Currentness: when a fact changes, does the context carry the current version, and not the old.

An agent's memory is written over time, and facts change: the user switches editors, a
project stops running its linter in CI, a colleague moves city. The application writes the
new fact as a new memory; the old one is still there. This benchmark measures what
``build_context`` then puts in front of the model when asked about the fact.

The stream (deterministic from a seed): *slots* (a subject and an attribute: the user's
editor, the api service's indentation, Alice's city) each get a first fact; a share of them
is later **updated** (a new value for the same slot: "prefers vim" -> "now prefers emacs") and
another share **contradicted** (what held last negated: "always run ruff in CI" -> "never
run ruff in CI"), some slots more than once. A share of the changed slots carries a slot key
on every version, in the item's payload (``{"key": "preference:user:editor"}``), the others
none, so keyed and unkeyed changes can be told apart: the ``lifecycle`` mode declares it as
the item's :attr:`~agent_engine.models.ContextItem.key`, the ``baseline`` mode ignores it.
Filler memories from :mod:`agent_engine.bench.synthetic` are interleaved, and every item gets
a timestamp in stream order. User preferences go to global memory, project conventions and
facts about people to project memory.

Then, for every changed slot and budget, ``build_context`` is asked a question about the slot
and the package is scored: *current included* (the latest version was selected), *stale
excluded* (no older version was), and *both*.

Each :class:`Mode` writes the same stream its own way and answers the same questions; all the
modes named run in one process, so their figures compare directly. ``baseline`` is memory
without a lifecycle: every version is an ordinary item, nothing marks one as replacing
another. ``lifecycle`` writes the same items through the same stores, declaring each keyed
version's slot, so a newer version supersedes the older one as it is written.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs

from agent_engine.assembler.assembler import AssemblerConfig, ContextAssembler
from agent_engine.assembler.package import ContextPackage
from agent_engine.bench import synthetic
from agent_engine.embeddings import Embedder
from agent_engine.errors import ValidationError
from agent_engine.memory.inmemory import InMemoryBackend
from agent_engine.models import ContextItem, ContextRequest, Status, Task, Tier
from agent_engine.tiers.dedup import DEFAULT_MERGE
from agent_engine.tiers.scope import local_id
from agent_engine.tiers.stores import MemoryStores
from agent_engine.tokens import DEFAULT_COUNTER, TokenCounter

__all__ = [
    "MODES",
    "CurrentnessConfig",
    "Mode",
    "Outcome",
    "SlotHistory",
    "Stream",
    "generate",
    "run_currentness",
    "score",
]

PROJECT_ID = "currentness"
USER_ID = "bench-user"


@attrs.frozen
class _Attribute:
    """One changeable attribute of a kind of subject, with the sentences that state it."""

    name: str
    values: tuple[str, ...]
    fact: str
    """A statement of the value: ``{subject}`` and ``{value}`` are filled in."""
    update: str
    """A later statement of a new value for the same slot."""
    negation: str
    """A later statement that the earlier value no longer holds."""
    question: str


@attrs.frozen
class _Domain:
    """A family of slots: its subjects, attributes, item kind and tier."""

    name: str
    kind: str
    tier: Tier
    subjects: tuple[str, ...]
    attributes: tuple[_Attribute, ...]


_DOMAINS = (
    _Domain(
        "preference",
        "preference",
        Tier.GLOBAL,
        ("the user",),
        (
            _Attribute(
                "editor",
                ("vim", "emacs", "VS Code", "Helix", "Sublime Text", "Zed"),
                "{subject} prefers {value} as their editor.",
                "{subject} now prefers {value} as their editor.",
                "{subject} no longer wants to use {value} as their editor.",
                "Which editor does {subject} prefer?",
            ),
            _Attribute(
                "theme",
                ("a dark theme", "a light theme", "solarized", "high contrast"),
                "{subject} likes {value} in every tool.",
                "{subject} has switched and now likes {value} in every tool.",
                "{subject} does not like {value} any more.",
                "Which colour theme does {subject} like?",
            ),
            _Attribute(
                "language",
                ("Python", "TypeScript", "Go", "Rust", "Kotlin"),
                "{subject} writes new scripts in {value}.",
                "{subject} now writes new scripts in {value}.",
                "{subject} has stopped writing new scripts in {value}.",
                "Which language does {subject} write new scripts in?",
            ),
            _Attribute(
                "shell",
                ("bash", "zsh", "fish", "nushell"),
                "{subject} uses {value} as their shell.",
                "{subject} moved to {value} as their shell.",
                "{subject} no longer uses {value} as their shell.",
                "Which shell does {subject} use?",
            ),
            _Attribute(
                "commits",
                ("small commits", "squashed commits", "signed commits", "conventional commits"),
                "{subject} wants {value} in every pull request.",
                "{subject} now wants {value} in every pull request.",
                "{subject} does not want {value} in pull requests any more.",
                "What kind of commits does {subject} want in pull requests?",
            ),
            _Attribute(
                "answers",
                ("short answers", "detailed answers", "answers with code first", "bullet lists"),
                "{subject} asks for {value} from the assistant.",
                "{subject} now asks for {value} from the assistant.",
                "{subject} no longer wants {value} from the assistant.",
                "What style of answers does {subject} ask the assistant for?",
            ),
        ),
    ),
    _Domain(
        "convention",
        "convention",
        Tier.PROJECT,
        (
            "the api service",
            "the billing module",
            "the web frontend",
            "the data pipeline",
            "the command line tool",
            "the auth service",
            "the mobile app",
            "the search indexer",
        ),
        (
            _Attribute(
                "indentation",
                ("4 spaces", "2 spaces", "tabs"),
                "Code in {subject} is indented with {value}.",
                "Code in {subject} is now indented with {value}.",
                "Code in {subject} is no longer indented with {value}.",
                "How is code in {subject} indented?",
            ),
            _Attribute(
                "test-runner",
                ("pytest", "unittest", "tox", "nox", "jest", "vitest"),
                "Tests for {subject} run with {value}.",
                "Tests for {subject} now run with {value}.",
                "Tests for {subject} must not run with {value} any more.",
                "Which test runner do the tests for {subject} use?",
            ),
            _Attribute(
                "linter",
                ("ruff", "flake8", "eslint", "pylint", "mypy"),
                "Always run {value} in CI for {subject}.",
                "Run {value} in CI for {subject} from now on.",
                "Never run {value} in CI for {subject}.",
                "Which linter runs in CI for {subject}?",
            ),
            _Attribute(
                "line-length",
                ("79 characters", "88 characters", "100 characters", "120 characters"),
                "Lines in {subject} are at most {value} long.",
                "Lines in {subject} may now be {value} long.",
                "The {value} line limit no longer applies to {subject}.",
                "What is the maximum line length in {subject}?",
            ),
            _Attribute(
                "deploy-day",
                ("Monday", "Tuesday", "Wednesday", "Thursday"),
                "{subject} is deployed on {value} mornings.",
                "{subject} is now deployed on {value} mornings.",
                "{subject} is not deployed on {value} any more.",
                "On which day is {subject} deployed?",
            ),
            _Attribute(
                "logging",
                ("structlog", "loguru", "the standard logging module", "pino"),
                "{subject} logs through {value}.",
                "{subject} now logs through {value}.",
                "{subject} must stop logging through {value}.",
                "Which logging library does {subject} use?",
            ),
        ),
    ),
    _Domain(
        "person",
        "fact",
        Tier.PROJECT,
        (
            "Alice",
            "Bruno",
            "Chen",
            "Dara",
            "Emeka",
            "Farah",
            "Goran",
            "Hana",
            "Ivo",
            "Jun",
            "Kemal",
            "Lena",
        ),
        (
            _Attribute(
                "city",
                ("Lisbon", "Berlin", "Nairobi", "Toronto", "Osaka", "Lima", "Oslo"),
                "{subject} lives in {value}.",
                "{subject} has moved and now lives in {value}.",
                "{subject} does not live in {value} any more.",
                "Where does {subject} live?",
            ),
            _Attribute(
                "job",
                ("a backend engineer", "a designer", "a data analyst", "a product manager"),
                "{subject} works as {value}.",
                "{subject} changed roles and now works as {value}.",
                "{subject} no longer works as {value}.",
                "What is {subject}'s job?",
            ),
            _Attribute(
                "team",
                ("the payments team", "the platform team", "the mobile team", "the search team"),
                "{subject} is on {value}.",
                "{subject} has joined {value}.",
                "{subject} has left {value}.",
                "Which team is {subject} on?",
            ),
            _Attribute(
                "pet",
                ("a cat", "a dog", "a parrot", "two rabbits"),
                "{subject} has {value} at home.",
                "{subject} now has {value} at home.",
                "{subject} no longer has {value} at home.",
                "What pet does {subject} have?",
            ),
        ),
    ),
)


def _slots() -> list[tuple[_Domain, str, _Attribute]]:
    return [
        (domain, subject, attribute)
        for domain in _DOMAINS
        for subject in domain.subjects
        for attribute in domain.attributes
    ]


MAX_SLOTS = len(_slots())
"""How many distinct slots the generator knows (the most a stream can hold)."""


@attrs.frozen
class CurrentnessConfig:
    """What to generate and measure.

    ``updated`` and ``contradicted`` are the shares of slots that change (the rest keep their
    first fact); ``keyed`` is the share of changed slots whose versions carry a slot key;
    ``max_changes`` bounds how often one slot changes. ``filler`` memories are interleaved.
    """

    slots: int = 96
    updated: float = 0.3
    contradicted: float = 0.2
    keyed: float = 0.5
    max_changes: int = 2
    filler: int = 1500
    budgets: tuple[int, ...] = (512, 1024)
    modes: tuple[str, ...] = ("baseline", "lifecycle")
    seed: int = 0

    def __attrs_post_init__(self) -> None:
        if not 1 <= self.slots <= MAX_SLOTS:
            raise ValidationError(
                f"slots must be in [1, {MAX_SLOTS}], got {self.slots}",
                field="slots",
                value=self.slots,
            )
        if not (
            self.updated >= 0 and self.contradicted >= 0 and self.updated + self.contradicted <= 1
        ):
            raise ValidationError(
                "updated and contradicted must be shares summing to at most 1",
                field="updated",
                value=(self.updated, self.contradicted),
            )
        if not 0 <= self.keyed <= 1 or self.max_changes < 1 or self.filler < 0:
            raise ValidationError(
                "keyed must be a share, max_changes at least 1, filler not negative",
                field="keyed",
                value=(self.keyed, self.max_changes, self.filler),
            )

    @property
    def changes(self) -> tuple[int, int]:
        """How many slots are updated and how many contradicted (each a question per budget)."""
        updated = round(self.slots * self.updated)
        return updated, min(self.slots - updated, round(self.slots * self.contradicted))


@attrs.frozen
class SlotHistory:
    """One slot that changed: its versions' ids, oldest first, and what to ask about it."""

    key: str
    change: str
    """``update`` (the last version states a new value) or ``contradiction`` (it negates the
    value stated before it)."""
    keyed: bool
    tier: Tier
    question: str
    versions: tuple[str, ...]
    """Local item ids, oldest first: the last is current, every other one is stale."""

    @property
    def current(self) -> str:
        """The id of the version that holds now."""
        return self.versions[-1]

    @property
    def stale(self) -> tuple[str, ...]:
        """The ids of the versions that no longer hold."""
        return self.versions[:-1]


@attrs.frozen
class Stream:
    """What a run writes and asks.

    The memories in the order and with the timestamps they are written, and the changed slots
    to ask about.
    """

    items: tuple[ContextItem, ...]
    histories: tuple[SlotHistory, ...]
    stable: int
    """Slots whose first fact still holds (written, never asked about)."""

    @property
    def ends_at(self) -> datetime:
        """The time of the last memory written."""
        return self.items[-1].timestamp


def _changes(rng: random.Random, config: CurrentnessConfig) -> list[str | None]:
    """Per slot, how it changes (``None``: never), in exact shares of ``config.slots``."""
    updated, contradicted = config.changes
    unchanged = config.slots - updated - contradicted
    plan: list[str | None] = [
        *(["update"] * updated),
        *(["contradiction"] * contradicted),
        *([None] * unchanged),
    ]
    rng.shuffle(plan)
    return plan


def generate(config: CurrentnessConfig) -> Stream:
    """The stream ``config`` describes, the same for the same config (seeded)."""
    rng = random.Random(config.seed)  # noqa: S311 - reproducible test data, not security
    slots = rng.sample(_slots(), config.slots)
    changes = _changes(rng, config)
    changed = [n for n, change in enumerate(changes) if change is not None]
    keyed = set(rng.sample(changed, round(len(changed) * config.keyed)))
    # Each fact version gets a position in [0, 1): first facts early, changes after them.
    events: list[tuple[float, int, ContextItem]] = []
    histories: list[SlotHistory] = []
    for n, ((domain, subject, attribute), change) in enumerate(zip(slots, changes, strict=True)):
        key = f"{domain.name}:{_slug(subject)}:{attribute.name}"
        payload = {"key": key} if n in keyed else {}
        values = rng.sample(attribute.values, len(attribute.values))
        position = rng.uniform(0.0, 0.5)
        texts = [attribute.fact.format(subject=subject, value=values[0])]
        if change == "update":
            steps = rng.randint(1, min(config.max_changes, len(values) - 1))
            texts += [
                attribute.update.format(subject=subject, value=v) for v in values[1 : steps + 1]
            ]
        elif change == "contradiction":
            # Possibly updated first; then what held last is negated.
            steps = rng.randint(0, min(config.max_changes, len(values)) - 1)
            texts += [
                attribute.update.format(subject=subject, value=v) for v in values[1 : steps + 1]
            ]
            texts.append(attribute.negation.format(subject=subject, value=values[steps]))
        ids = []
        for version, text in enumerate(texts):
            if version:
                position = rng.uniform(position, position + (1.0 - position) / 2)
            item_id = f"{key}:v{version + 1}"
            ids.append(item_id)
            item = ContextItem(
                id=item_id,
                kind=domain.kind,
                text=_sentence(text),
                tier=domain.tier,
                namespace="pending",
                source="user" if domain.tier is Tier.GLOBAL else "agent",
                importance=0.8,
                payload=payload,
            )
            events.append((position, len(events), item))
        if change is not None:
            histories.append(
                SlotHistory(
                    key=key,
                    change=change,
                    keyed=n in keyed,
                    tier=domain.tier,
                    question=attribute.question.format(subject=subject),
                    versions=tuple(ids),
                )
            )
    for filler in synthetic.generate(config.filler, namespace="pending", seed=config.seed):
        # Unpinned: a pinned filler would take budget for reasons that have nothing to do
        # with currentness.
        unpinned = attrs.evolve(filler, status=Status.CONFIRMED)
        events.append((rng.random(), len(events), unpinned))
    events.sort(key=lambda event: event[:2])
    start = datetime(2025, 1, 6, 9, tzinfo=UTC)
    step = timedelta(days=180) / max(1, len(events))
    items = tuple(
        attrs.evolve(item, timestamp=start + step * order, session=f"session {order // 25 + 1}")
        for order, (_, _, item) in enumerate(events)
    )
    return Stream(items, tuple(histories), stable=config.slots - len(changed))


def _slug(text: str) -> str:
    return text.removeprefix("the ").replace(" ", "-").lower()


def _sentence(text: str) -> str:
    return text[0].upper() + text[1:]


# ----------------------------------------------------------------------------- scoring


@attrs.frozen
class Outcome:
    """What one package held of one slot's versions."""

    current_included: bool
    stale_excluded: bool

    @property
    def both(self) -> bool:
        """The current version in and every stale one out: the context is right."""
        return self.current_included and self.stale_excluded


def score(package: ContextPackage, history: SlotHistory) -> Outcome:
    """Score ``package`` against the versions of ``history`` (by the items' local ids)."""
    selected = {local_id(s.item.namespace, s.item.id) for s in package.selections}
    return Outcome(
        current_included=history.current in selected,
        stale_excluded=not selected.intersection(history.stale),
    )


# ----------------------------------------------------------------------------- modes

Ingest = Callable[[Stream, Embedder, TokenCounter], tuple[ContextAssembler, Task]]
"""Writes a stream into fresh memory, as a mode's application would; returns the assembler to
ask and the task to ask for."""


@attrs.frozen
class Mode:
    """One way of writing memory and building contexts, measured on the same stream."""

    name: str
    description: str
    ingest: Ingest


def _ingest_plain(
    stream: Stream, embedder: Embedder, counter: TokenCounter
) -> tuple[ContextAssembler, Task]:
    """Every version is written as an ordinary new memory, one at a time, in stream order.

    Nothing merges either: near-duplicate merge is part of the lifecycle this mode does without.
    """
    return _ingest(stream, embedder, counter, keyed=False)


def _ingest_keyed(
    stream: Stream, embedder: Embedder, counter: TokenCounter
) -> tuple[ContextAssembler, Task]:
    """As :func:`_ingest_plain`, with each keyed version's slot declared as its ``key``.

    The stores merge near-duplicates as they do by default.
    """
    return _ingest(stream, embedder, counter, keyed=True)


def _ingest(
    stream: Stream, embedder: Embedder, counter: TokenCounter, *, keyed: bool
) -> tuple[ContextAssembler, Task]:
    now = stream.ends_at + timedelta(hours=1)
    backend = InMemoryBackend(embedder=embedder)
    stores = MemoryStores(
        backend,
        task_backend=backend,
        max_project_items=None,
        confirm=lambda _request: True,
        clock=lambda: now,
        merge=DEFAULT_MERGE if keyed else None,
    )
    task = Task(id="currentness-task", project_id=PROJECT_ID, user_id=USER_ID)
    scoped = {
        Tier.PROJECT: stores.project_store(PROJECT_ID),
        Tier.GLOBAL: stores.global_store(USER_ID),
    }
    for item in stream.items:
        store = scoped[item.tier]
        key = item.payload.get("key") if keyed else None
        store.add(attrs.evolve(item, namespace=store.namespace, key=key))
    assembler = ContextAssembler(
        stores, config=AssemblerConfig(track_access=False), counter=counter
    )
    return assembler, task


MODES: Mapping[str, Mode] = {
    "baseline": Mode(
        "baseline",
        "memory without a lifecycle: every version is an ordinary item",
        _ingest_plain,
    ),
    "lifecycle": Mode(
        "lifecycle",
        "keyed versions declare their slot: the newer supersedes the older as it is written",
        _ingest_keyed,
    ),
}
"""The modes a run can name, measured side by side on the same stream."""


def run_currentness(
    embedder: Embedder,
    *,
    counter: TokenCounter = DEFAULT_COUNTER,
    config: CurrentnessConfig | None = None,
    modes: Mapping[str, Mode] = MODES,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Measure every mode at every budget; return per-question records and rates.

    The stream is generated once; each mode writes it into fresh memory and is asked about
    every changed slot at every budget.

    ``modes`` is the registry the names in ``config.modes`` are looked up in, so a mode under
    development can be measured beside the shipped ones.
    """
    config = config or CurrentnessConfig()
    unknown = sorted(set(config.modes) - set(modes))
    if unknown:
        raise ValidationError(
            f"unknown currentness mode(s): {', '.join(unknown)}", field="modes", value=unknown
        )
    stream = generate(config)
    records: list[dict[str, Any]] = []
    for name in config.modes:
        assembler, task = modes[name].ingest(stream, embedder, counter)
        for history in stream.histories:
            for budget in sorted(config.budgets):
                package = assembler.build_context(
                    task, ContextRequest(budget_tokens=budget, query=history.question)
                )
                outcome = score(package, history)
                records.append(
                    {
                        "mode": name,
                        "budget": budget,
                        "slot": history.key,
                        "change": history.change,
                        "keyed": history.keyed,
                        "versions": len(history.versions),
                        "current_included": outcome.current_included,
                        "stale_excluded": outcome.stale_excluded,
                        "both": outcome.both,
                    }
                )
            if progress is not None:
                progress(1)
    return {
        "config": attrs.asdict(config),
        "stream": {
            "items": len(stream.items),
            "changed_slots": len(stream.histories),
            "stable_slots": stream.stable,
            "embedder": embedder.name,
        },
        "modes": {name: modes[name].description for name in config.modes},
        "records": records,
        "summary": summarize(records),
    }


_RATES = ("current_included", "stale_excluded", "both")


def _rates(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    chosen = list(records)
    return {
        "n": len(chosen),
        **{rate: statistics.fmean(float(r[rate]) for r in chosen) for rate in _RATES},
    }


def summarize(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Rates per mode and budget: overall, and per kind of change and keyed or not."""
    summary: dict[str, Any] = {}
    for mode in dict.fromkeys(r["mode"] for r in records):
        summary[mode] = {}
        for budget in sorted({r["budget"] for r in records if r["mode"] == mode}):
            mine = [r for r in records if r["mode"] == mode and r["budget"] == budget]
            groups = {
                f"{change}, {'keyed' if keyed else 'unkeyed'}": [
                    r for r in mine if r["change"] == change and r["keyed"] == keyed
                ]
                for change in ("update", "contradiction")
                for keyed in (True, False)
            }
            summary[mode][str(budget)] = {
                "overall": _rates(mine),
                **{group: _rates(rs) for group, rs in groups.items() if rs},
            }
    return summary
