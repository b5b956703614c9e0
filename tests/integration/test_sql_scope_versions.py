"""Every write bumps the change counter of each scope it touches, in one statement."""

from __future__ import annotations

from contextlib import AbstractContextManager

import sqlalchemy as sa

from agent_engine.memory.sql import SQLAlchemyBackend
from agent_engine.memory.sql._meta import _BUMP_CHUNK, read_versions
from agent_engine.models import ContextItem, Tier

from .conftest import statements

SCOPES = [
    ("project:p1", Tier.PROJECT),
    ("project:p2", Tier.PROJECT),
    ("project:p2", Tier.GLOBAL),
    ("global:u1", Tier.GLOBAL),
]


def _item(item_id: str, namespace: str, tier: Tier) -> ContextItem:
    return ContextItem(id=item_id, kind="note", text=item_id, namespace=namespace, tier=tier)


def _versions(backend: SQLAlchemyBackend) -> dict[tuple[str, Tier], int]:
    with backend.engine.connect() as connection:
        return read_versions(connection, None, None)


def _bumps(engine: sa.Engine) -> AbstractContextManager[list[str]]:
    """The statements that write ``ae_scope_versions`` while the block runs."""
    return statements(
        engine,
        lambda statement: (
            "ae_scope_versions" in statement and statement.lstrip().upper().startswith("INSERT")
        ),
    )


class TestBumpVersions:
    def test_a_write_to_several_scopes_bumps_each_in_one_statement(self, sql_url):
        """Each scope a batch touches goes up by one, through a single upsert."""
        with SQLAlchemyBackend(sql_url) as backend:
            items = [_item(f"i{n}", namespace, tier) for n, (namespace, tier) in enumerate(SCOPES)]
            with _bumps(backend.engine) as bumps:
                backend.add_many([*items, _item("again", *SCOPES[0])])
            assert len(bumps) == 1
            assert _versions(backend) == dict.fromkeys(SCOPES, 1)
            with _bumps(backend.engine) as bumps:
                backend.delete_many(["i0", "i1", "i3"])
            assert len(bumps) == 1
            assert _versions(backend) == {
                SCOPES[0]: 2,
                SCOPES[1]: 2,
                SCOPES[2]: 1,
                SCOPES[3]: 2,
            }

    def test_many_scopes_are_bumped_in_chunks(self, sql_url):
        """A write across more scopes than one statement binds still bumps every one of them."""
        scopes = [(f"project:p{n:04d}", Tier.PROJECT) for n in range(2 * _BUMP_CHUNK + 7)]
        with SQLAlchemyBackend(sql_url) as backend:
            backend.add_many([_item(namespace, namespace, tier) for namespace, tier in scopes])
            with _bumps(backend.engine) as bumps:
                assert backend.clear({"tier": "project"}) == len(scopes)
            assert len(bumps) == 3
            assert _versions(backend) == dict.fromkeys(scopes, 2)
