"""Properties of every package, whatever the memory, budget, split, policy and format."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

import attrs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_engine import (
    DEFAULT_COUNTER,
    DEFAULT_POLICIES,
    AssemblerConfig,
    ContextAssembler,
    ContextRequest,
    GatherLimits,
    HashingEmbedder,
    InMemoryBackend,
    Layout,
    MemoryStores,
    OmissionReason,
    RenderFormat,
    SelectionReason,
    Status,
    Task,
    Tier,
    TierShares,
)
from agent_engine.assembler.render import Line, render_lines

NOW = datetime(2024, 6, 1, 12, tzinfo=UTC)

VOCABULARY = (
    "deploy api database migration flaky test login sleep wait cache pip node version "
    "preference tabs spaces review commit branch release rollback incident latency "
    "caroline melanie yesterday painting 2024 12345678 v1.2.3 é naïve 日本語 <tag> a&b "
    "extraordinarily-long-hyphenated-identifier_with_underscores ! ? ; : \x1b[31mFAILED\x1b[0m"
)
WORDS = VOCABULARY.split()

phrases = st.lists(st.sampled_from(WORDS), min_size=1, max_size=30)
texts = st.one_of(
    phrases,
    # Far beyond most budgets (up to ~5,000 tokens); repeating keeps generation cheap.
    st.tuples(phrases, st.integers(20, 500)).map(lambda pair: pair[0] * pair[1]),
).map(" ".join)


@st.composite
def item_specs(draw):
    return {
        "text": draw(texts),
        "kind": draw(st.sampled_from(["note", "turn", "decision", "tool_output"])),
        "status": draw(st.sampled_from(list(Status))),
        "session": draw(st.sampled_from(["", "", "s1", "s2", "session three"])),
        "importance": draw(st.sampled_from([0.0, 0.3, 0.5, 0.9, 1.0])),
        "age": timedelta(hours=draw(st.integers(0, 24 * 60))),
        "expires": draw(st.sampled_from([None, None, None, -1, 1])),
        "copy_of": draw(st.none() | st.integers(0, 100)),
        "payload_only": draw(st.integers(0, 9)) == 0,  # shown as its payload's fields
    }


@st.composite
def shares(draw):
    """A split; with a session share or (more often) leaving the session unsaid."""
    task, project, global_ = (draw(st.integers(0, 10)) for _ in range(3))
    session = draw(st.none() | st.integers(0, 10))
    total = task + project + global_ + (session or 0)
    if not total:
        task = total = 1
    rest = max(0.0, 1 - task / total - project / total - (session or 0) / total)
    return TierShares(
        task / total, project / total, rest, session=None if session is None else session / total
    )


scenarios = st.fixed_dictionaries(
    {
        "tiers": st.fixed_dictionaries({tier: st.lists(item_specs(), max_size=8) for tier in Tier}),
        "budget": st.integers(1, 4000),
        "shares": shares(),
        "policy": st.sampled_from(sorted(DEFAULT_POLICIES)),
        "head": st.integers(0, 4),
        "tail": st.integers(0, 4),
        "format": st.sampled_from(list(RenderFormat)),
        "query": st.lists(st.sampled_from(WORDS), max_size=6).map(" ".join),
        "shares_on_request": st.booleans(),
        "stable_prefix": st.booleans(),
        "in_session": st.booleans(),
    }
)


def build(scenario, **settings):
    """Store the scenario's items in a fresh in-memory assembler and build one package.

    ``settings``: more of the assembler's configuration (a summary, say).
    """
    shares_ = scenario["shares"]
    config = AssemblerConfig(
        head=scenario["head"],
        tail=scenario["tail"],
        layout=Layout(format=scenario["format"]),
        shares=TierShares() if scenario["shares_on_request"] else shares_,
        stable_prefix=scenario["stable_prefix"],
        **settings,
    )
    assembler = ContextAssembler(
        MemoryStores(
            InMemoryBackend(embedder=HashingEmbedder(dim=32)),
            clock=lambda: NOW,
            confirm=lambda _request: True,
            max_project_items=None,
        ),
        config=config,
    )
    task = Task(
        id="t", project_id="p", user_id="u", session_id="s" if scenario["in_session"] else None
    )
    # A task in no session reads no session memory: the scenario's session items go to a
    # session of the project that no one reads.
    stores = {
        **assembler.stores.for_task(attrs.evolve(task, session_id="s")),
        **assembler.stores.for_task(task),
    }
    all_texts = [spec["text"] for specs in scenario["tiers"].values() for spec in specs]
    items = []
    for tier, specs in scenario["tiers"].items():
        store = stores[tier]
        batch = []
        for spec in specs:
            text = spec["text"]
            if spec["copy_of"] is not None and all_texts:
                text = all_texts[spec["copy_of"] % len(all_texts)].upper()  # same fingerprint
            expires = spec["expires"]
            payload = {"output": text[:80], "lines": len(text)} if spec["payload_only"] else {}
            batch.append(
                store.new_item(
                    spec["kind"],
                    "" if spec["payload_only"] else text,
                    payload=payload,
                    status=spec["status"],
                    importance=spec["importance"],
                    session=spec["session"],
                    timestamp=NOW - spec["age"],
                    expires_at=None if expires is None else NOW + timedelta(hours=expires),
                )
            )
        store.add_many(batch)
        items.extend(batch)
    request = ContextRequest(
        budget_tokens=scenario["budget"],
        query=scenario["query"],
        policy=scenario["policy"],
        shares=shares_ if scenario["shares_on_request"] else None,
    )
    return assembler.build_context(task, request), {item.id: item for item in items}


def tiers_off(scenario):
    """The tiers a scenario's build does not read: those of no share, and a session of none."""
    split = scenario["shares"]
    if not scenario["in_session"]:
        return {Tier.SESSION} | {tier for tier in Tier if split.of(tier) == 0}
    return {tier for tier in Tier if split.with_session().of(tier) == 0}


def beside_pinned(package, item):
    """What the package's pinned selections and ``item`` (whole) cost rendered together."""
    lines = [Line(s.item, s.tier, s.body) for s in package.selections if s.reason is PINNED]
    lines.append(Line(item, item.tier, item.body))
    return DEFAULT_COUNTER.count(render_lines(lines, package.layout))


PINNED = SelectionReason.PINNED
OUT_OF_ROOM = {OmissionReason.OVER_BUDGET, OmissionReason.NO_ROOM_FOR_HEADER}


class TestEveryPackage:
    @settings(
        max_examples=100,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(scenarios)
    def test_invariants(self, scenario):
        """Budget, uniqueness, pinned-first and complete, truthful accounting hold for any input."""
        package, stored = build(scenario)
        budget = scenario["budget"]
        rendered = package.render()

        # (a) the budget holds, and the package's figures are what its render costs.
        assert DEFAULT_COUNTER.count(rendered) == package.tokens_used <= budget
        assert package.tokens_used <= sum(s.tokens for s in package.selections)
        if scenario["format"] is RenderFormat.XML:
            ET.fromstring(f"<context>{rendered}</context>")  # noqa: S314 - our own output

        # (b) no item twice, no content twice.
        ids = [s.item.id for s in package.selections]
        assert len(ids) == len(set(ids))
        fingerprints = [s.item.fingerprint for s in package.selections]
        assert len(fingerprints) == len(set(fingerprints))
        assert all(not s.item.expired(NOW) for s in package.selections)

        # (c) pinned items come first: one left out could not have fit beside those chosen
        # (a tier whose share is 0 is off: its pinned items are not read at all).
        reasons = {o.item_id: o.reason for o in package.omissions}
        off = tiers_off(scenario)
        for item in stored.values():
            if not item.pinned or item.id in ids or item.expired(NOW) or item.tier in off:
                continue
            assert item.id in reasons, item.id
            if reasons[item.id] is not OmissionReason.DUPLICATE:
                assert beside_pinned(package, item) > budget, item.id

        # (d) every candidate is accounted for exactly once: chosen, or left out with a reason
        # that is true of it.
        accounted = ids + [o.item_id for o in package.omissions]
        assert len(accounted) == len(set(accounted))
        assert set(accounted) <= set(stored)
        assert not {stored[item_id].tier for item_id in accounted} & off
        assert len(accounted) == sum(u.candidates for u in package.usage)
        for usage in package.usage:
            assert usage.selected == sum(1 for s in package.selections if s.tier is usage.tier)
        for omission in package.omissions:
            item = stored[omission.item_id]
            if omission.reason is OmissionReason.EXPIRED:
                assert item.expired(NOW)
            if omission.reason is OmissionReason.LOWER_SCORE:
                assert beside_pinned(package, item) <= budget, omission
            if omission.reason in OUT_OF_ROOM and not (
                scenario["stable_prefix"] and omission.tier is not Tier.TASK
            ):  # with a stable prefix, only the task may reach the whole budget
                assert beside_pinned(package, item) > budget, omission


class TestPinnedItems:
    @settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        count=st.integers(0, 90),
        budget=st.integers(1, 1500),
        per_source=st.integers(1, 20),
        words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=12),
    )
    def test_every_pinned_item_is_explained(self, count, budget, per_source, words):
        """However many items are pinned, each is chosen or left out with a reason, once."""
        assembler = ContextAssembler(
            InMemoryBackend(embedder=HashingEmbedder(dim=32)),
            config=AssemblerConfig(limits=GatherLimits(per_source=per_source)),
            clock=lambda: NOW,
        )
        project = assembler.project_store("p")
        pinned = project.add_many(
            project.new_item(
                "rule",
                f"{n} " + " ".join(words[: 1 + n % len(words)]),
                status=Status.PINNED,
                timestamp=NOW - timedelta(minutes=n),
            )
            for n in range(count)
        )
        task = Task(id="t", project_id="p", user_id="u")
        package = assembler.build_context(task, ContextRequest(budget_tokens=budget))
        accounted = [s.item.id for s in package.selections]
        accounted += [o.item_id for o in package.omissions]
        assert sorted(accounted) == sorted(item.id for item in pinned)
        assert all(s.reason is PINNED for s in package.selections)
