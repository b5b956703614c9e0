"""Session memory: a scope between a task and its project, read by the session's tasks.

Every test runs on every backend kind (the ``backend`` fixture): a session's memory is items
of the session tier in their own namespace, kept by the store like any other scope's.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from agent_engine import (
    AssemblerConfig,
    ContextAssembler,
    ContextRequest,
    MemoryStores,
    SessionMemoryStore,
    Status,
    Task,
    Tier,
    TierShares,
    ValidationError,
    promote,
)
from agent_engine.tiers.scope import (
    parse_session_namespace,
    session_namespace,
    task_namespace,
)
from agent_engine.tiers.session import SUMMARY_KIND, extractive_digest

IN_SESSION = Task(id="t1", project_id="p", user_id="u", session_id="s")
ALONE = Task(id="t2", project_id="p", user_id="u")


def stores_over(backend, clock, **settings):
    return MemoryStores(backend, clock=clock, confirm=lambda _request: True, **settings)


class TestScope:
    def test_namespace_is_owned_by_project_and_user(self):
        """Two projects (or users) with a session of one id each have their own."""
        names = {
            session_namespace("s", "p", "u"),
            session_namespace("s", "q", "u"),
            session_namespace("s", "p", "v"),
            session_namespace("s:p", "u", "x"),
        }
        assert len(names) == 4
        assert parse_session_namespace(session_namespace("a:b", "p%", "u")) == ("p%", "u", "a:b")

    def test_never_a_tasks_namespace(self):
        """A session and a task of one id are different scopes."""
        assert session_namespace("x", "p", "u") != task_namespace("x", "p", "u")
        assert parse_session_namespace(task_namespace("x", "p", "u")) is None

    def test_sessions_are_isolated(self, backend, clock):
        """A session of one project never sees another's items, whatever the ids."""
        stores = stores_over(backend, clock)
        mine = stores.session_store("s", "p", "u")
        theirs = stores.session_store("s", "q", "u")
        found = mine.add_finding("The build cache lives in /tmp/cache.")
        assert theirs.get(found.id) is None
        assert theirs.count() == 0
        assert [item.id for item in mine.list_all()] == [found.id]
        assert found.tier is Tier.SESSION


class TestStores:
    def test_a_task_in_a_session_reads_it(self, backend, clock):
        """A task with a session id reads that session's store; a task without, none."""
        stores = stores_over(backend, clock)
        opened = stores.for_task(IN_SESSION)
        assert opened[Tier.SESSION] is stores.session_store("s", "p", "u")
        assert Tier.SESSION not in stores.for_task(ALONE)

    def test_tasks_of_one_session_share_its_memory(self, backend, clock):
        """What one task of a session writes there, the next task of the session reads."""
        stores = stores_over(backend, clock)
        stores.session_of(IN_SESSION).add_message("user", "Call me Sam, and keep it brief.")
        later = Task(id="t9", project_id="p", user_id="u", session_id="s")
        assert [item.text for item in stores.for_task(later)[Tier.SESSION].list_all()] == [
            "user: Call me Sam, and keep it brief."
        ]

    def test_session_memory_outlives_the_process(self, backend, clock):
        """Session memory goes where project memory goes: another opener reads it."""
        stores_over(backend, clock).session_store("s", "p", "u").add_finding("Port 8080 is taken.")
        again = stores_over(backend, clock).session_store("s", "p", "u")
        assert [item.text for item in again.list_all()] == ["Port 8080 is taken."]


class TestBudget:
    def test_with_session_takes_its_share_from_task_and_project(self):
        """40/40/20 becomes 30/20/30/20; a split that names a session share is kept."""
        assert TierShares().with_session() == TierShares(0.3, 0.3, 0.2, session=0.2)
        named = TierShares(0.5, 0.2, 0.2, session=0.1)
        assert named.with_session() is named
        assert TierShares(0.0, 0.0, 1.0).with_session().session == 0.0

    def test_a_session_never_turns_the_task_off(self):
        """Each of task and project gives a quarter of its share, however small it is."""
        small = TierShares(0.1, 0.1, 0.8).with_session()
        assert small == TierShares(0.075, 0.075, 0.8, session=0.05)

    def test_a_request_without_the_session_keeps_the_whole_split(self, backend, clock):
        """A request whose tiers leave the session out gives it nothing to take from."""
        assembler = ContextAssembler(stores_over(backend, clock))
        request = ContextRequest(budget_tokens=1000, tiers=[Tier.TASK, Tier.PROJECT, Tier.GLOBAL])
        package = assembler.build_context(IN_SESSION, request)
        allocated = {usage.tier: usage.allocated for usage in package.usage}
        assert allocated == {Tier.GLOBAL: 200, Tier.PROJECT: 400, Tier.SESSION: 0, Tier.TASK: 400}
        alone = assembler.build_context(ALONE, ContextRequest(budget_tokens=1000))
        assert alone.usage_of(Tier.SESSION).allocated == 0

    def test_shares_sum_with_the_session(self):
        """A session share counts in the sum: four shares that miss 1 are refused."""
        with pytest.raises(ValidationError, match="sum to 1") as caught:
            TierShares(0.4, 0.4, 0.2, session=0.2)
        assert caught.value.field == "shares"

    def test_a_session_gets_its_share_of_the_budget(self, backend, clock):
        """The package accounts for the session's allocation, between the task and project."""
        assembler = ContextAssembler(stores_over(backend, clock))
        assembler.stores.session_of(IN_SESSION).add_finding("Deploys go through the staging box.")
        package = assembler.build_context(
            IN_SESSION, ContextRequest(budget_tokens=1000, query="how do deploys go?")
        )
        allocated = {usage.tier: usage.allocated for usage in package.usage}
        assert allocated == {Tier.GLOBAL: 200, Tier.PROJECT: 300, Tier.SESSION: 200, Tier.TASK: 300}
        assert [s.tier for s in package.selections] == [Tier.SESSION]

    def test_no_session_no_session_row(self, backend, clock):
        """A task that runs in no session is built as before: 40/40/20, three tiers."""
        assembler = ContextAssembler(stores_over(backend, clock))
        package = assembler.build_context(ALONE, ContextRequest(budget_tokens=1000))
        assert {usage.tier: usage.allocated for usage in package.usage} == {
            Tier.GLOBAL: 200,
            Tier.PROJECT: 400,
            Tier.TASK: 400,
        }

    @pytest.mark.parametrize(
        "request_fields",
        [
            {"shares": TierShares(0.5, 0.3, 0.2, session=0.0)},
            {"tiers": [Tier.TASK, Tier.PROJECT, Tier.GLOBAL]},
        ],
        ids=["share-0", "tiers"],
    )
    def test_a_session_turned_off_is_not_read(self, backend, clock, request_fields):
        """A session share of 0, or tiers without it, leaves it out, pinned items too."""
        assembler = ContextAssembler(stores_over(backend, clock))
        session = assembler.stores.session_of(IN_SESSION)
        session.pin(session.add_finding("Always answer in French.").id)
        package = assembler.build_context(
            IN_SESSION, ContextRequest(budget_tokens=500, **request_fields)
        )
        assert package.selections == ()
        assert package.usage_of(Tier.SESSION).allocated == 0

    def test_a_three_tier_spill_order_keeps_the_session_after_the_task(self):
        """Spill orders written before sessions existed stay valid."""
        config = AssemblerConfig(spill_order=(Tier.PROJECT, Tier.TASK, Tier.GLOBAL))
        assert config.spill_order == (Tier.PROJECT, Tier.TASK, Tier.SESSION, Tier.GLOBAL)
        with pytest.raises(ValidationError, match="each tier once"):
            AssemblerConfig(spill_order=(Tier.TASK, Tier.TASK, Tier.PROJECT, Tier.GLOBAL))

    def test_render_puts_the_session_between_project_and_task(self, backend, clock):
        """Most stable first: global, project, the session, then the task nearest the question."""
        assembler = ContextAssembler(stores_over(backend, clock))
        assembler.task_store(IN_SESSION).add_instruction("Fix the login bug")
        assembler.stores.session_of(IN_SESSION).add_finding("The login bug is in auth.py")
        project = assembler.project_store("p")
        project.add_decision("We use OAuth for login")
        text = assembler.build_context(
            IN_SESSION, ContextRequest(budget_tokens=800, query="login bug")
        ).render()
        assert text.index("Project memory") < text.index("Session memory") < text.index("Task")


class TestFinalisation:
    def test_summary_kept_in_the_project_and_session_cleared(self, backend, clock):
        """Finalising leaves a session_summary candidate in the project and clears the rest."""
        stores = stores_over(backend, clock)
        session = stores.session_store("s", "p", "u")
        session.add_finding("The flaky test fails only on Mondays.", importance=0.9)
        session.add_message("user", "Thanks, that fixed it. Ship it tomorrow.")
        session.checkpoint()
        end = stores.finish_session("s", "p", "u")
        assert end.removed == 2
        assert session.count() == 0
        assert session.checkpoints() == []
        kept = end.summary_item
        assert kept is not None
        assert kept.kind == SUMMARY_KIND
        assert kept.status is Status.CANDIDATE
        assert kept.tier is Tier.PROJECT
        assert stores.project_store("p").get(kept.id) == kept
        assert end.summary.splitlines() == [
            "- The flaky test fails only on Mondays.",
            "- user: Thanks, that fixed it.",
        ]

    def test_an_empty_session_leaves_no_summary(self, backend, clock):
        """Nothing held, nothing said: the project gains nothing."""
        stores = stores_over(backend, clock)
        end = stores.finish_session("s", "p", "u")
        assert (end.summary, end.summary_item, end.removed) == ("", None, 0)
        assert stores.project_store("p").count() == 0

    def test_a_summarizer_that_fails_changes_nothing(self, backend, clock):
        """The summary is made first: a summarizer answering no text stops the finalisation."""
        stores = stores_over(backend, clock)
        session = stores.session_store("s", "p", "u")
        session.add_finding("Keep the cache warm.")
        with pytest.raises(ValidationError, match="must return text"):
            session.finish(into=stores.project_store("p"), summarizer=lambda _items: 42)
        assert session.count() == 1
        assert stores.project_store("p").count() == 0

    def test_a_preset_promotes_findings_into_the_project(self, backend, clock):
        """Under a preset, what qualifies is promoted into the project as a candidate."""
        stores = stores_over(backend, clock, promotion="balanced")
        session = stores.session_store("s", "p", "u")
        finding = session.add_finding("Error: the CI runner needs 4 GB.", kind="failure")
        for _ in range(3):
            session.record_access([finding.id], clock())
        end = stores.finish_session("s", "p", "u", summarizer=None)
        assert [result.item.text for result in end.promoted] == [finding.text]
        promoted = end.promoted[0].item
        assert promoted.status is Status.CANDIDATE
        assert promoted.provenance is not None
        assert promoted.provenance.source_tier is Tier.SESSION
        assert end.summary_item is None

    def test_two_sessions_promoting_one_finding_keep_one(self, backend, clock):
        """The dedup rules keep promotions single: the second boosts the first."""
        stores = stores_over(backend, clock)
        project = stores.project_store("p")
        results = []
        for name in ("s1", "s2"):
            session = stores.session_store(name, "p", "u")
            found = session.add_finding("Run migrations before the deploy.")
            results.append(promote(session, project, found.id))
        assert [result.duplicate for result in results] == [False, True]
        assert project.count() == 1

    def test_promotion_goes_through_the_session(self, backend, clock):
        """Task -> session and session -> project are allowed; session -> global is not."""
        stores = stores_over(backend, clock)
        task = stores.task_store(IN_SESSION)
        session = stores.session_of(IN_SESSION)
        step = task.add_reasoning("The API rate limit is 100 requests a minute.", "plan")
        into_session = promote(task, session, step.id)
        assert into_session.item.tier is Tier.SESSION
        with pytest.raises(ValidationError, match="task -> session -> project"):
            promote(session, stores.global_store("u"), into_session.item.id)

    @pytest.mark.parametrize("into", ["global", "another-project"])
    def test_finalising_into_another_scope_is_refused(self, backend, clock, into):
        """A session is finalised into its own project only."""
        stores = stores_over(backend, clock)
        session = stores.session_store("s", "p", "u")
        session.add_finding("Keep the cache warm.")
        target = stores.global_store("u") if into == "global" else stores.project_store("q")
        with pytest.raises(ValidationError, match="into its project") as caught:
            session.finish(into=target)
        assert caught.value.field == "into"
        assert session.count() == 1

    def test_a_failing_summarizer_leaves_the_project_candidates_alone(self, backend, clock):
        """Under a preset, the confirmation step runs only once the summary is made and kept."""
        stores = stores_over(backend, clock, promotion="balanced", candidate_window=timedelta(0))
        project = stores.project_store("p")
        waiting = project.add(project.new_item("note", "An old candidate.", status="candidate"))
        stores.session_store("s", "p", "u").add_finding("Keep the cache warm.")

        def failing(_items):
            raise RuntimeError("the model is down")

        with pytest.raises(RuntimeError):
            stores.finish_session("s", "p", "u", summarizer=failing)
        assert project.get(waiting.id) == waiting
        end = ContextAssembler(stores).finish_session("s", "p", "u", summarizer=None)
        assert (end.summary_item, end.removed) == (None, 1)
        assert end.review is not None


def test_extractive_digest_is_bounded_and_ranked(clock):
    """The digest names the weightiest items first, once per text, at most eight lines."""
    session = SessionMemoryStore("s", clock=clock)
    for n in range(12):
        session.add_finding(f"Finding number {n} is here. More detail follows.", importance=n / 20)
    digest = extractive_digest(session.list_all()).splitlines()
    assert len(digest) == 8
    assert digest[0] == "- Finding number 11 is here."
