"""Shared pools: agents of a project share memory under explicit, audited grants.

Every test runs on every backend kind (the ``backend`` fixture): the grants are the
backend's, read at every call, so what one view is granted or refused holds for all.
"""

from __future__ import annotations

import hashlib
import io
import json
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_engine import (
    AccessDeniedError,
    AuditAction,
    ExportFileError,
    InMemoryBackend,
    Tier,
    UnknownAgentError,
    ValidationError,
)
from agent_engine.memory import Access, export_store, import_store
from agent_engine.tiers.pools import Pools
from agent_engine.tiers.scope import parse_pool_namespace, pool_namespace


def shop(backend, clock, project="shop"):
    pools = Pools(backend, project, clock=clock)
    for agent in ("scout", "coder", "critic"):
        pools.register(agent)
    return pools


class TestGrants:
    def test_a_grant_is_journaled_and_replaced_by_the_next(self, backend, clock):
        """Granting journals who gave what; granting again replaces it and says what it was."""
        pools = shop(backend, clock)
        pools.grant("notes", "scout", Access.READ)
        given = pools.grant("notes", "scout", "write", by="lead")
        assert (given.access, given.granted_by) == (Access.WRITE, "lead")
        assert [(g.agent, g.access) for g in pools.grants("notes")] == [("scout", Access.WRITE)]
        events = [e for e in pools.journal("notes") if e.action is AuditAction.GRANT]
        assert [e.detail["replaced"] for e in events] == ["read", None]
        assert events[0].detail["by"] == "lead"

    def test_granting_to_an_unknown_agent_is_refused(self, backend, clock):
        """An agent the project never registered gets nothing, even one another project has."""
        pools = shop(backend, clock)
        Pools(backend, "blog", clock=clock).register("ghost")
        with pytest.raises(UnknownAgentError) as caught:
            pools.grant("notes", "ghost", Access.WRITE)
        assert (caught.value.field, caught.value.value) == ("agent", "ghost")
        assert pools.grants("notes") == []
        actions = [e.action for e in pools.journal("notes")]
        assert actions == [AuditAction.ABORT, AuditAction.GRANT]

    def test_a_revocation_holds_for_views_opened_before_it(self, backend, clock):
        """The grant is read at every call: a view opened earlier is refused at once."""
        pools = shop(backend, clock)
        pools.grant("notes", "coder", Access.WRITE)
        view = pools.open("notes", "coder")
        view.post("The cache key includes the locale.")
        assert pools.revoke("notes", "coder") is True
        assert pools.revoke("notes", "coder") is False
        with pytest.raises(AccessDeniedError):
            view.list_all()
        assert pools.journal("notes")[0].action is AuditAction.REVOKE

    def test_bad_grants_are_refused_by_field(self, backend, clock):
        """An unknown access, a blank agent or grantor: typed errors, nothing stored."""
        pools = shop(backend, clock)
        for call, field in (
            (lambda: pools.grant("notes", "scout", "admin"), "access"),
            (lambda: pools.grant("notes", " scout", "read"), "agent"),
            (lambda: pools.grant("notes", "scout", "read", by=""), "granted_by"),
            (lambda: pools.grant("", "scout"), "pool"),
        ):
            with pytest.raises(ValidationError) as caught:
                call()
            assert caught.value.field == field
        assert pools.grants("notes") == []


class TestAccess:
    def test_read_grants_read_and_write_grants_write(self, backend, clock):
        """A reader reads what a writer wrote; its writes are refused before anything is stored."""
        pools = shop(backend, clock)
        pools.grant("notes", "scout", Access.WRITE)
        pools.grant("notes", "critic", Access.READ)
        note = pools.open("notes", "scout").post("The staging box reboots at 02:00 UTC.")
        critic = pools.open("notes", "critic")
        assert [item.id for item in critic.list_all()] == [note.id]
        for write in (
            lambda: critic.post("I can write too"),
            lambda: critic.forget(note.id),
            lambda: critic.pin(note.id),
        ):
            with pytest.raises(AccessDeniedError, match="may not write pool 'notes'"):
                write()
        assert [item.pinned for item in critic.list_all()] == [False]

    def test_the_journal_names_who_wrote_and_agents_are_not_merged(self, backend, clock):
        """Every event a view writes names its agent; one agent repeating another is kept."""
        pools = shop(backend, clock)
        for agent in ("scout", "coder"):
            pools.grant("notes", agent, Access.WRITE)
        first = pools.open("notes", "scout").post("The build needs 8 GB of memory.")
        again = pools.open("notes", "coder").post("The build needs 8 GB of memory.")
        assert (first.id != again.id, first.agent, again.agent) == (True, "scout", "coder")
        pools.open("notes", "coder").forget(first.id)
        written = [e for e in pools.journal("notes") if e.action is not AuditAction.GRANT]
        assert [(e.action, e.detail["agent"]) for e in written][:2] == [
            (AuditAction.ERASE, "coder"),
            (AuditAction.ADD, "coder"),
        ]

    def test_every_item_records_its_writer(self, backend, clock):
        """The view stamps its agent on what it writes, whatever the item said."""
        pools = shop(backend, clock)
        for agent in ("scout", "coder"):
            pools.grant("board", agent, Access.WRITE)
        scout, coder = pools.open("board", "scout"), pools.open("board", "coder")
        forged = scout.new_item("note", "Deploy freeze until Monday.", agent="coder")
        assert scout.add(forged).agent == "scout"
        scout.put("status", "tests red")
        coder.put("status", "tests green")
        assert coder.read("status").text == "tests green"
        versions = scout.history(coder.read("status").id)
        assert [(v.text, v.agent) for v in versions] == [
            ("tests red", "scout"),
            ("tests green", "coder"),
        ]
        assert [item.agent for item in scout.query({"agent": "coder"})] == ["coder"]

    def test_a_tool_result_cache_is_shared_until_it_expires(self, backend, clock):
        """One agent pays for a tool call; the others reuse the result while it is fresh."""
        pools = shop(backend, clock)
        pools.grant("tools", "scout", Access.WRITE)
        pools.grant("tools", "coder", Access.READ)
        pools.open("tools", "scout").cache(
            "search", {"q": "rate limit"}, {"hits": 3}, ttl=timedelta(minutes=5)
        )
        coder = pools.open("tools", "coder")
        assert coder.cached("search", {"q": "rate limit"}).payload["output"] == {"hits": 3}
        assert coder.cached("search", {"q": "other"}) is None
        clock.now += timedelta(minutes=6)
        assert coder.cached("search", {"q": "rate limit"}) is None

    def test_pools_are_scopes_of_their_project(self, backend, clock):
        """Two projects' pools of one name, and the project's own memory, never mix."""
        mine, theirs = shop(backend, clock), shop(backend, clock, project="blog")
        mine.grant("notes", "scout", Access.WRITE)
        theirs.grant("notes", "scout", Access.WRITE)
        note = mine.open("notes", "scout").post("Prices are integer cents.")
        assert theirs.open("notes", "scout").get(note.id) is None
        assert theirs.open("notes", "scout").count() == 0
        assert note.tier is Tier.PROJECT
        assert parse_pool_namespace(note.namespace) == ("shop", "notes")
        assert pool_namespace("a:b", "p%") != pool_namespace("b", "p%:a")


_OPS = ("get", "list", "count", "search", "read", "post", "forget")


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    case=st.fixed_dictionaries(
        {
            "texts": st.lists(
                st.sampled_from(["alpha beta", "gamma", "delta epsilon", "zeta"]), max_size=4
            ),
            "granted": st.sampled_from([None, Access.READ]),
            "op": st.sampled_from(_OPS),
            "probe_held": st.booleans(),
        }
    )
)
def test_an_agent_without_a_grant_learns_nothing(backend, clock, case):
    """Whatever a pool holds, an agent denied an operation gets the same refusal, and nothing
    changes: the error reads alike for a held id and a made-up one, a full pool and none."""
    texts, granted, op, probe_held = (case[k] for k in ("texts", "granted", "op", "probe_held"))
    backend.clear()
    pools = Pools(backend, "shop", clock=clock)
    for agent in ("owner", "probe"):
        pools.register(agent)
    pools.grant("vault", "owner", Access.WRITE)
    if granted is not None:
        pools.grant("vault", "probe", granted)
    else:
        pools.revoke("vault", "probe")
    owner = pools.open("vault", "owner")
    held = [owner.post(text).id for text in texts]
    target = held[0] if held and probe_held else "vault-item-that-is-not-there"
    probe = pools.open("vault", "probe")
    calls = {
        "get": lambda: probe.get(target),
        "list": probe.list_all,
        "count": probe.count,
        "search": lambda: probe.search("alpha"),
        "read": lambda: probe.read("status"),
        "post": lambda: probe.post("a note from the probe"),
        "forget": lambda: probe.forget(target),
    }
    may = granted is not None and op not in ("post", "forget")
    before = sorted(item.id for item in owner.list_all())
    if may:
        calls[op]()
    else:
        with pytest.raises(AccessDeniedError) as caught:
            calls[op]()
        wanted = "write" if op in ("post", "forget") else "read"
        assert str(caught.value) == f"agent 'probe' may not {wanted} pool 'vault'"
    assert sorted(item.id for item in owner.list_all()) == before


class TestSnapshots:
    def test_an_exported_pool_takes_its_grants_along(self, backend, clock, open_backend):
        """A pool's export holds its items, its grants and their agents; importing it twice
        into another store gives them once."""
        pools = shop(backend, clock)
        pools.grant("notes", "scout", Access.WRITE)
        pools.grant("notes", "critic", Access.READ)
        pools.open("notes", "scout").post("Staging reboots at 02:00 UTC.")
        out = io.StringIO()
        report = export_store(backend, out, namespace=pool_namespace("notes", "shop"))
        assert (report.items, report.agents, report.grants) == (1, 2, 2)
        target = open_backend("memory", None)
        first = import_store(target, io.StringIO(out.getvalue()), grants=True)
        again = import_store(target, io.StringIO(out.getvalue()), grants=True)
        assert (first.agents, first.grants, again.agents, again.grants) == (2, 2, 0, 0)
        moved = Pools(target, "shop", clock=clock)
        assert moved.agents() == ["critic", "scout"]
        assert moved.grants("notes") == pools.grants("notes")
        assert [i.agent for i in moved.open("notes", "critic").list_all()] == ["scout"]
        granted = [e for e in moved.journal("notes") if e.action is AuditAction.GRANT]
        by_import = sorted(e.detail["agent"] for e in granted if e.detail["by"] == "import")
        assert by_import == ["critic", "scout"]  # beside the source's own journal, imported

    def test_an_import_never_gives_back_a_revoked_grant(self, backend, clock):
        """Grants come from a file only when asked, and never replace or restore the target's."""
        pools = shop(backend, clock)
        pools.grant("notes", "scout", Access.WRITE)
        pools.grant("notes", "critic", Access.READ)
        out = io.StringIO()
        export_store(backend, out, namespace=pool_namespace("notes", "shop"))
        pools.revoke("notes", "critic")
        pools.grant("notes", "scout", Access.READ)
        assert import_store(backend, io.StringIO(out.getvalue())).grants == 0
        assert [(g.agent, g.access) for g in pools.grants("notes")] == [("scout", Access.READ)]
        # Asked for, a grant is added where the agent has none: the revoked one comes back only
        # because nothing in the target now says otherwise, and it is journaled as the import's.
        report = import_store(backend, io.StringIO(out.getvalue()), grants=True)
        assert report.grants == 1
        assert [(g.agent, g.access) for g in pools.grants("notes")] == [
            ("critic", Access.READ),
            ("scout", Access.READ),
        ]
        assert pools.journal("notes")[0].detail["by"] == "import"

    def test_a_grant_to_an_agent_no_one_registered_refuses_the_import(self, backend, clock):
        """Checked before anything is written: no item, agent or grant arrives."""
        pools = shop(backend, clock)
        pools.grant("notes", "scout", Access.WRITE)
        pools.open("notes", "scout").post("A note.")
        lines = io.StringIO()
        export_store(backend, lines, namespace=pool_namespace("notes", "shop"))
        # The grant names an agent the file's agent records do not.
        text = lines.getvalue().replace(
            '"agent":"scout","granted_at"', '"agent":"ghost","granted_at"'
        )
        target = Pools(InMemoryBackend(), "shop", clock=clock)
        with pytest.raises(ExportFileError, match="ghost"):
            import_store(target.backend, io.StringIO(_resealed(text)), grants=True)
        assert (target.backend.count(), target.agents(), target.grants("notes")) == (0, [], [])

    def test_a_rollback_leaves_the_grants_alone(self, backend, clock):
        """Grants are access rules, not memory: rolling a pool back never undoes a revocation."""
        pools = shop(backend, clock)
        pools.grant("notes", "scout", Access.WRITE)
        pools.grant("notes", "critic", Access.READ)
        saved = pools.checkpoint("notes", "before")
        pools.open("notes", "scout").post("A note written after the checkpoint.")
        pools.revoke("notes", "critic")
        pools.rollback("notes", saved.id)
        assert pools.checkpoints("notes") == [saved]
        assert pools.open("notes", "scout").count() == 0
        assert [g.agent for g in pools.grants("notes")] == ["scout"]


def _resealed(text: str) -> str:
    """A file whose lines were changed and whose end record was rewritten to match them."""
    lines = text.splitlines(keepends=True)
    end = json.loads(lines[-1])
    end["sha256"] = hashlib.sha256("".join(lines[:-1]).encode("utf-8")).hexdigest()
    return "".join(lines[:-1]) + json.dumps(end) + "\n"
