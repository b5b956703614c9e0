"""Requests that say what they want: tiers, kinds, a limit, a threshold, the archive, a window."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agent_engine import (
    AssemblerConfig,
    ContextAssembler,
    ContextRequest,
    HashingEmbedder,
    InMemoryBackend,
    MemoryStores,
    OmissionReason,
    SelectionReason,
    Task,
    Tier,
    TierShares,
    ValidationError,
)

NOW = datetime(2024, 3, 1, 9, tzinfo=UTC)
TASK = Task(id="t", project_id="p", user_id="u", description="fix the deploy retries")


@pytest.fixture
def assembler():
    """Memory in all three tiers, a pinned item in each, one archived deploy decision."""
    stores = MemoryStores(
        InMemoryBackend(embedder=HashingEmbedder()), clock=lambda: NOW, confirm=lambda _: True
    )
    assembler = ContextAssembler(
        stores, clock=lambda: NOW, config=AssemblerConfig(track_access=False)
    )
    project = assembler.project_store("p")
    for n in range(12):
        project.add_decision(f"deploy decision {n}: retry the deploy {n} times")
        project.add_convention(f"deploy convention {n}: name deploy branches deploy-{n}")
    project.pin(project.add_decision("deploys are frozen on Fridays").id)
    archived = project.add_decision("deploy retries once used exponential backoff jitter")
    project.archive(archived.id)
    world = assembler.global_store("u")
    world.pin(world.add_preference("answer in short sentences about deploys").id)
    world.add_pattern("check deploy logs before retrying")
    steps = assembler.task_store(TASK)
    steps.add_instruction(TASK.description)
    for n in range(6):
        steps.add_reasoning(f"deploy step {n}: looked at the retries", "work")
    return assembler


def build(assembler, **fields):
    fields.setdefault("query", "deploy retries")
    return assembler.build_context(TASK, ContextRequest(**fields))


def tiers_seen(package):
    return {s.tier for s in package.selections} | {o.tier for o in package.omissions}


class TestTiers:
    def test_a_tier_left_out_is_not_read_and_its_room_goes_to_the_others(self, assembler):
        full = build(assembler, budget_tokens=300)
        assert Tier.GLOBAL in {s.tier for s in full.selections}  # its pinned item, at least
        package = build(assembler, budget_tokens=300, tiers=["task", "project"])
        assert tiers_seen(package) == {Tier.TASK, Tier.PROJECT}
        usage = {u.tier: u for u in package.usage}
        assert usage[Tier.GLOBAL].allocated == usage[Tier.GLOBAL].used == 0
        assert usage[Tier.GLOBAL].candidates == 0
        # The global share's room was spill-over: the package is as full as before.
        assert package.tokens_used >= full.tokens_used - 20

    def test_a_share_of_zero_turns_a_tier_off_pinned_items_included(self, assembler):
        shares = TierShares(task=0.5, project=0.5, global_=0.0)
        package = build(assembler, budget_tokens=300, shares=shares)
        assert Tier.GLOBAL not in tiers_seen(package)
        assert [u.allocated for u in package.usage if u.tier is Tier.GLOBAL] == [0]

    def test_no_tier_on_gives_an_empty_package(self, assembler):
        package = build(assembler, budget_tokens=300, tiers=[])
        assert package.selections == ()
        assert package.omissions == ()
        assert package.render() == ""


class TestKinds:
    def test_only_the_kinds_asked_for_in_every_tier(self, assembler):
        package = build(assembler, budget_tokens=2000, kinds=["decision"])
        assert package.selections
        assert {s.item.kind for s in package.selections} == {"decision"}
        # Not even left out: the other kinds were never candidates.
        assert all(o.item_id.startswith("project:") for o in package.omissions)
        pinned = [s for s in package.selections if s.reason is SelectionReason.PINNED]
        assert [s.item.text for s in pinned] == ["deploys are frozen on Fridays"]

    def test_kinds_reach_the_task_timeline_too(self, assembler):
        package = build(assembler, budget_tokens=2000, kinds=["instruction"])
        assert [s.item.kind for s in package.selections] == ["instruction"]
        assert package.selections[0].reason is SelectionReason.HEAD


class TestLimit:
    def test_at_most_limit_items_in_the_order_the_fill_offers_them(self, assembler):
        roomy = build(assembler, budget_tokens=2000)
        assert len(roomy.selections) > 5
        package = build(assembler, budget_tokens=2000, limit=5)
        assert len(package.selections) == 5
        # Pinned items first, then the task's HEAD: the fill's own priorities.
        reasons = [s.reason for s in package.selections]
        assert reasons.count(SelectionReason.PINNED) == 2
        assert SelectionReason.HEAD in reasons
        limited = [o for o in package.omissions if o.reason is OmissionReason.LIMIT]
        assert limited
        assert {o.item_id for o in limited} <= {s.item.id for s in roomy.selections} | {
            o.item_id for o in roomy.omissions
        }

    def test_a_limit_the_budget_never_reaches_changes_nothing(self, assembler):
        assert (
            build(assembler, budget_tokens=120, limit=500).render()
            == build(assembler, budget_tokens=120).render()
        )


class TestThreshold:
    def test_the_requests_threshold_wins_over_the_assemblers(self, assembler):
        package = build(assembler, budget_tokens=2000, min_score=0.99)
        below = [o for o in package.omissions if o.reason is OmissionReason.BELOW_THRESHOLD]
        assert below
        assert all(o.score is not None and o.score < 0.99 for o in below)
        ranked = [s for s in package.selections if s.reason is SelectionReason.RANKED]
        assert all(s.score >= 0.99 for s in ranked)
        # Pinned, HEAD and TAIL items are not held to it.
        assert {SelectionReason.PINNED, SelectionReason.HEAD, SelectionReason.TAIL} <= {
            s.reason for s in package.selections
        }
        lenient = ContextAssembler(
            assembler.stores,
            clock=lambda: NOW,
            config=AssemblerConfig(track_access=False, min_score=0.99),
        )
        assert not [
            o
            for o in build(lenient, budget_tokens=2000, min_score=-1.0).omissions
            if o.reason is OmissionReason.BELOW_THRESHOLD
        ]


class TestArchive:
    def test_the_archive_is_paged_in_unless_the_request_leaves_it_out(self, assembler):
        def backoff_seen(package):
            texts = [s.item.text for s in package.selections]
            return any("backoff" in text for text in texts)

        query = "exponential backoff jitter"
        assert backoff_seen(build(assembler, budget_tokens=2000, query=query)) is True
        package = build(assembler, budget_tokens=2000, query=query, archive=False)
        assert backoff_seen(package) is False
        assert all(s.item.archived_at is None for s in package.selections)
        assert not any("backoff" in str(o.item_id) for o in package.omissions)


class TestWindow:
    @pytest.mark.parametrize(
        ("window", "used", "expected"),
        [(8_000, 0, 640), (20_000, 0, 1_600), (100_000, 0, 5_000), (100_000, 60_000, 3_200)],
    )
    def test_eight_percent_of_the_free_window_at_most_five_thousand(self, window, used, expected):
        request = ContextRequest.for_window(window, used_tokens=used, query="q")
        assert request.budget_tokens == expected
        assert request.query == "q"

    def test_a_fraction_and_a_cap_of_ones_own(self):
        assert ContextRequest.for_window(10_000, fraction=0.5, cap=None).budget_tokens == 5_000
        assert ContextRequest.for_window(10_000, fraction=0.5, cap=900).budget_tokens == 900

    @pytest.mark.parametrize(
        ("arguments", "field"),
        [
            ({"window_tokens": 8_000, "used_tokens": 8_000}, "used_tokens"),
            ({"window_tokens": 0}, "window_tokens"),
            ({"window_tokens": 8_000, "fraction": 0.0}, "fraction"),
            ({"window_tokens": 8_000, "fraction": 1.5}, "fraction"),
            ({"window_tokens": 10, "fraction": 0.05}, "fraction"),
            ({"window_tokens": 8_000, "cap": 0}, "cap"),
            ({"window_tokens": "8k"}, "window_tokens"),
        ],
    )
    def test_a_window_with_no_room_or_bad_numbers_is_refused(self, arguments, field):
        window = arguments.pop("window_tokens")
        with pytest.raises(ValidationError) as refused:
            ContextRequest.for_window(window, **arguments)
        assert refused.value.field == field


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"tiers": "task"}, "tiers"),
        ({"tiers": ["task", "team"]}, "tiers"),
        ({"kinds": "decision"}, "kinds"),
        ({"kinds": [""]}, "kinds"),
        ({"limit": 0}, "limit"),
        ({"limit": 2.5}, "limit"),
        ({"min_score": float("nan")}, "min_score"),
        ({"min_score": "high"}, "min_score"),
        ({"archive": "no"}, "archive"),
    ],
)
def test_bad_knobs_are_refused_by_name(fields, field):
    with pytest.raises(ValidationError) as refused:
        ContextRequest(budget_tokens=100, **fields)
    assert refused.value.field == field


def test_a_plain_request_builds_what_it_always_built(assembler):
    """Every knob's default is "as configured": naming the defaults changes nothing."""
    plain = build(assembler, budget_tokens=400)
    named = build(
        assembler,
        budget_tokens=400,
        tiers=list(Tier),
        kinds=None,
        limit=None,
        min_score=None,
        archive=True,
    )
    assert named.render() == plain.render()
    assert [o.item_id for o in named.omissions] == [o.item_id for o in plain.omissions]
