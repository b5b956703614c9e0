"""Export to a JSONL file and import from one, on every kind of backend.

Every backend is exported from and imported into (against the in-memory reference, both
ways); bad files (cut short, damaged, of another version, or naming an item the target holds
otherwise) are refused whole, and a write failing mid-import takes back what it added.
"""

from __future__ import annotations

import hashlib
import io
import json
from datetime import UTC, datetime, timedelta

import attrs
import pytest

from agent_engine import (
    DimensionMismatchError,
    ExportFileError,
    HashingEmbedder,
    InMemoryBackend,
    MemoryStores,
    Tier,
    ValidationError,
    View,
    to_dict,
)
from agent_engine.errors import CopyIncompleteError
from agent_engine.memory.export import (
    EXPORT_VERSION,
    export_store,
    import_store,
    restore_plan,
    restore_scope,
)
from tests.conftest import failing_aliases

T0 = datetime(2024, 4, 1, 9, tzinfo=UTC)


def _fill(backend) -> None:
    """Three tiers, a conflict, an archived and a superseded memory, aliases."""
    clock = iter(T0 + timedelta(minutes=n) for n in range(1000)).__next__
    stores = MemoryStores(backend, clock=clock, confirm=lambda _request: True)
    shop = stores.project_store("shop")
    shop.add_convention("Always rebase feature branches on main.", "git")
    shop.add_convention("Never rebase feature branches on main.", "git")
    old = shop.add_decision("Prices are floats.")
    shop.supersede(old.id, shop.new_item("decision", "Prices are integer cents."))
    archived = shop.add_pattern("Billing exports run nightly.")
    shop.archive(archived.id)
    shop.add_alias("k8s", ["kubernetes"])
    stores.project_store("blog").add_decision("Posts are Markdown.")
    stores.global_store("ann").add_preference("Short answers.", "style")


def _snapshot(backend) -> tuple:
    items = [to_dict(i) for i in backend.query(None, limit=None, order_by="+id")]
    conflicts = sorted(
        (c.id, c.item_a, c.item_b)
        for ns in ("project:shop", "project:blog")
        for c in backend.conflicts.of_scope(ns, Tier.PROJECT, include_resolved=True)
    )
    aliases = {ns: backend.aliases.of_namespace(ns) for ns in backend.aliases.namespaces()}
    events = sorted(e.id for e in backend.audit.events(limit=None))
    return items, conflicts, aliases, events


@pytest.fixture
def embedder():
    return HashingEmbedder(dim=32)


def _exported(backend, **options) -> str:
    out = io.StringIO()
    export_store(backend, out, **options)
    return out.getvalue()


def test_every_backend_exports_what_the_reference_imports(backend_kind, open_backend, embedder):
    """A whole store leaves any backend and arrives whole: items, conflicts, journal, aliases."""
    source = open_backend(backend_kind, embedder)
    _fill(source)
    target = InMemoryBackend(embedder=embedder)
    report = import_store(target, io.StringIO(_exported(source)))
    assert _snapshot(target) == _snapshot(source)
    assert (report.items, report.unchanged, report.conflicts, report.aliases) == (7, 0, 1, 1)


def test_every_backend_imports_and_imports_once(backend_kind, open_backend, embedder, tmp_path):
    """Imported into any backend, a file is the reference's store; again, it changes nothing."""
    reference = InMemoryBackend(embedder=embedder)
    _fill(reference)
    path = tmp_path / "store.jsonl"
    export_store(reference, path)
    target = open_backend(backend_kind, embedder)
    first = import_store(target, path)
    assert _snapshot(target) == _snapshot(reference)
    again = import_store(target, path)
    assert (first.items, again.items, again.unchanged, again.events) == (7, 0, 7, 0)
    assert _snapshot(target) == _snapshot(reference)


def test_a_scope_holds_only_its_own(embedder):
    """A project's export has its items, conflicts, journal and aliases, no other scope's."""
    source = InMemoryBackend(embedder=embedder)
    _fill(source)
    text = _exported(source, namespace="project:shop", tier=Tier.PROJECT)
    target = InMemoryBackend(embedder=embedder)
    report = import_store(target, io.StringIO(text))
    assert {i.namespace for i in target.query(None, limit=None)} == {"project:shop"}
    assert report.items == source.count({"namespace": "project:shop"}) == 5
    assert target.aliases.namespaces() == ["project:shop"]
    assert {e.namespace for e in target.audit.events(limit=None)} == {"project:shop"}


def test_vectors_are_optional(embedder):
    """Without vectors the file is smaller, and the target's embedder makes them again."""
    source = InMemoryBackend(embedder=embedder)
    _fill(source)
    full, bare = _exported(source), _exported(source, vectors=False)
    assert len(bare) < len(full)
    target = InMemoryBackend(embedder=embedder)
    import_store(target, io.StringIO(bare))
    assert all(item.embedding is not None for item in target.query(None, limit=None))
    # The re-made vectors are the target's own: importing the full file now conflicts nowhere.
    assert import_store(target, io.StringIO(full)).items == 0


_DAMAGE = {
    "cut-at-a-line": lambda text: "".join(text.splitlines(keepends=True)[:-3]),
    "cut-mid-line": lambda text: text[: len(text) // 2],
    "a-line-edited": lambda text: text.replace("integer cents", "integer dollars", 1),
    "a-line-lost": lambda text: "".join(
        line for n, line in enumerate(text.splitlines(keepends=True)) if n != 2
    ),
    "newer-version": lambda text: text.replace(
        f'"version":{EXPORT_VERSION}', f'"version":{EXPORT_VERSION + 1}', 1
    ),
    "not-an-export": lambda text: '{"hello": "world"}\n',
    "empty": lambda text: "",
    "after-the-end": lambda text: text + '{"record":"item"}\n',
}


def _middle_line(text: str) -> int:
    """The line a cut in the middle of ``text`` falls on."""
    return text[: len(text) // 2].count("\n") + 1


@pytest.mark.parametrize(
    ("how", "line"),
    [
        ("cut-at-a-line", None),
        ("cut-mid-line", "middle"),
        ("a-line-edited", "end"),
        ("a-line-lost", "end"),
        ("newer-version", 1),
        ("not-an-export", 1),
        ("empty", None),
        ("after-the-end", "after"),
    ],
)
def test_a_bad_file_is_refused_whole(embedder, how, line):
    """Cut short, damaged or foreign: a typed error naming the line, and nothing imported."""
    source = InMemoryBackend(embedder=embedder)
    _fill(source)
    text = _exported(source)
    damaged = _DAMAGE[how](text)
    target = InMemoryBackend(embedder=embedder)
    with pytest.raises(ExportFileError) as caught:
        import_store(target, io.StringIO(damaged))
    lines = len(damaged.splitlines())
    where = {"middle": _middle_line(text), "end": lines, "after": lines}
    assert caught.value.line == where.get(line, line)
    assert target.count() == 0
    assert target.audit.count() == 0
    assert target.aliases.namespaces() == []


def test_an_item_held_otherwise_refuses_the_import(embedder):
    """Two memories under one id: refused before anything is written."""
    source = InMemoryBackend(embedder=embedder)
    _fill(source)
    text = _exported(source)
    target = InMemoryBackend(embedder=embedder)
    import_store(target, io.StringIO(text))
    (item,) = target.query({"namespace": "project:blog"}, limit=1)
    target.update(attrs.evolve(item, text="Posts are HTML."))
    before = _snapshot(target)
    with pytest.raises(ExportFileError, match="other content") as caught:
        import_store(target, io.StringIO(text))
    assert caught.value.value == item.id
    assert _snapshot(target) == before


def test_vectors_of_another_size_are_refused(embedder):
    source = InMemoryBackend(embedder=embedder)
    _fill(source)
    target = InMemoryBackend(embedder=HashingEmbedder(dim=64))
    with pytest.raises(DimensionMismatchError):
        import_store(target, io.StringIO(_exported(source)))
    assert target.count() == 0


def test_a_write_failing_midway_takes_the_items_back(embedder):
    """All or nothing: the items added before the failure are removed again."""
    source = InMemoryBackend(embedder=embedder)
    _fill(source)
    target = failing_aliases(InMemoryBackend(embedder=embedder), "add")
    with pytest.raises(CopyIncompleteError, match="were removed"):
        import_store(target, io.StringIO(_exported(source)))
    assert target.count() == 0
    assert target.conflicts.of_scope("project:shop", Tier.PROJECT, include_resolved=True) == []


def _scope_state(backend, namespace: str) -> tuple:
    items = [
        to_dict(i) for i in backend.query({"namespace": namespace}, limit=None, order_by="+id")
    ]
    return items, backend.aliases.of_namespace(namespace)


def test_a_project_goes_back_to_its_snapshot(backend_kind, open_backend, embedder, tmp_path):
    """Changes since the snapshot are undone, what was lost comes back; nothing else moves."""
    backend = open_backend(backend_kind, embedder)
    _fill(backend)
    path = tmp_path / "shop.jsonl"
    export_store(backend, path, namespace="project:shop", tier=Tier.PROJECT)
    taken, blog = _scope_state(backend, "project:shop"), _scope_state(backend, "project:blog")
    shop = MemoryStores(backend, confirm=lambda _request: True).project_store("shop")
    added = shop.add_decision("Use tabs.")
    lost = shop.query({"kind": "convention"}, limit=1)[0]
    shop.forget(lost.id)
    pattern = shop.query({"kind": "pattern"}, limit=None, view=View.ALL)[0]
    shop.restore(pattern.id)
    shop.remove_alias("k8s")
    shop.add_alias("db", ["database"])

    plan = restore_plan(backend, path)
    assert plan.destructive
    assert ([i.id for i in plan.add], plan.forget) == ([lost.id], (added.id,))
    assert [i.id for i in plan.replace] == [pattern.id]
    restore_scope(backend, plan)
    assert _scope_state(backend, "project:shop") == taken
    assert _scope_state(backend, "project:blog") == blog
    again = restore_plan(backend, path)
    assert (again.add, again.replace, again.forget) == ((), (), ())
    assert not again.destructive


def test_a_whole_store_is_no_snapshot(embedder):
    source = InMemoryBackend(embedder=embedder)
    _fill(source)
    with pytest.raises(ExportFileError, match="one scope"):
        restore_plan(source, io.StringIO(_exported(source)))


@pytest.mark.parametrize(
    ("options", "field"),
    [
        pytest.param({"namespace": ""}, "namespace", id="empty-namespace"),
        pytest.param({"tier": "galaxy"}, "tier", id="unknown-tier"),
        pytest.param({"batch_size": 0}, "batch_size", id="no-batch"),
        pytest.param({"vectors": "yes"}, "vectors", id="vectors-not-a-bool"),
    ],
)
def test_bad_export_arguments_are_refused(embedder, tmp_path, options, field):
    """A typed error naming the argument, and no file."""
    source = InMemoryBackend(embedder=embedder)
    _fill(source)
    with pytest.raises(ValidationError) as caught:
        export_store(source, tmp_path / "out.jsonl", **options)
    assert caught.value.field == field
    assert list(tmp_path.iterdir()) == []


def test_an_unwritable_path_is_a_typed_error(embedder, tmp_path):
    source = InMemoryBackend(embedder=embedder)
    with pytest.raises(ExportFileError, match="cannot write"):
        export_store(source, tmp_path / "missing" / "out.jsonl")


def _resealed(lines: list[str]) -> str:
    """A file whose lines were changed and whose end record was rewritten to match them."""
    digest = hashlib.sha256("".join(lines[:-1]).encode("utf-8")).hexdigest()
    end = json.loads(lines[-1])
    end["sha256"] = digest
    return "".join(lines[:-1]) + json.dumps(end) + "\n"


def test_a_snapshot_holding_another_scopes_item_is_refused(embedder):
    """Even a consistent file may not write outside the scope it names: refused, unchanged."""
    source = InMemoryBackend(embedder=embedder)
    _fill(source)
    lines = _exported(source, namespace="project:shop", tier=Tier.PROJECT).splitlines(True)
    item = json.loads(lines[1])
    item["data"]["namespace"] = "project:blog"
    lines[1] = json.dumps(item, separators=(",", ":"), sort_keys=True) + "\n"
    before = _snapshot(source)
    with pytest.raises(ExportFileError, match="not of the snapshot's scope") as caught:
        restore_plan(source, io.StringIO(_resealed(lines)))
    assert caught.value.line == 2
    assert _snapshot(source) == before


def test_an_alias_record_is_checked_before_anything_is_written(embedder):
    """An alias the store would refuse refuses the file, with nothing imported."""
    source = InMemoryBackend(embedder=embedder)
    _fill(source)
    lines = _exported(source).splitlines(True)
    at = next(n for n, line in enumerate(lines) if '"record":"alias"' in line)
    alias = json.loads(lines[at])
    alias["data"]["expansions"] = [""]
    lines[at] = json.dumps(alias, separators=(",", ":"), sort_keys=True) + "\n"
    target = InMemoryBackend(embedder=embedder)
    with pytest.raises(ExportFileError) as caught:
        import_store(target, io.StringIO(_resealed(lines)))
    assert caught.value.line == at + 1
    assert (target.count(), target.audit.count()) == (0, 0)


def test_a_version_1_file_is_still_read(embedder):
    """Files written before items recorded their agent (version 1) import, agent ``""``."""
    source = InMemoryBackend(embedder=embedder)
    _fill(source)
    lines = _exported(source, namespace="project:shop", tier=Tier.PROJECT).splitlines(True)
    header = json.loads(lines[0])
    assert header["version"] == EXPORT_VERSION == 3
    header["version"] = 1
    lines[0] = json.dumps(header, separators=(",", ":"), sort_keys=True) + "\n"
    for n, line in enumerate(lines[1:-1], start=1):
        record = json.loads(line)
        if record["record"] == "item":
            del record["data"]["agent"]
            lines[n] = json.dumps(record, separators=(",", ":"), sort_keys=True) + "\n"
    target = InMemoryBackend(embedder=embedder)
    report = import_store(target, io.StringIO(_resealed(lines)))
    assert report.items == source.count({"namespace": "project:shop"})
    assert {item.agent for item in target.query(None, limit=None)} == {""}
