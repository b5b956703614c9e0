"""The SQL backend's reads on psycopg's asyncio API, for the async twin (PostgreSQL only).

SQLAlchemy's asyncio engine runs the statements the synchronous backend runs
(:mod:`._filters`), and the rows decode the same way (:func:`._rows.row_item`), so a
coroutine reads what a worker thread would, and waits on the server without taking one.
Driver errors become this library's errors through the backend's own translation, and
contention is retried with the same backoff, awaited.

An asyncio connection belongs to the event loop that opened it, so a reader serves the loop
it was first used on; the async twin keeps one reader per loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from agent_engine.errors import BackendError
from agent_engine.filters import Filter, Order
from agent_engine.memory.sql._engine import aretrying
from agent_engine.memory.sql._filters import chunks, count_items, items_by_id, select_items
from agent_engine.memory.sql._rows import row_item
from agent_engine.models import ContextItem

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

__all__ = ["AsyncSQLReads"]

T = TypeVar("T")


class AsyncSQLReads:
    """:class:`~agent_engine.memory.backend.AsyncReads` of a PostgreSQL store.

    ``translating`` turns driver errors into the library's (the backend's own), and
    ``check_open`` raises once the backend is closed: a closed backend reads nothing, on
    either API.
    """

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        dialect: str,
        translating: Callable[[], contextlib.AbstractContextManager[None]],
        check_open: Callable[[], None],
    ) -> None:
        self._engine = engine
        self._dialect = dialect
        self._translating = translating
        self._check_open = check_open
        self._loop: asyncio.AbstractEventLoop | None = None

    async def fetch(self, item_ids: list[str]) -> dict[str, ContextItem]:
        """The stored items among ``item_ids``, by id (in ``IN`` lists of bounded length)."""

        async def work(connection: AsyncConnection) -> list[Any]:
            rows: list[Any] = []
            for chunk in chunks(item_ids):
                rows.extend((await connection.execute(items_by_id(chunk))).all())
            return rows

        return {row.id: row_item(row) for row in await self._read(work)}

    async def select(self, where: Filter, order: Order, limit: int | None) -> list[ContextItem]:
        """The items ``where`` matches, in ``order``, at most ``limit``."""
        query = select_items(where, order, limit, self._dialect)

        async def work(connection: AsyncConnection) -> list[Any]:
            return list((await connection.execute(query)).all())

        return [row_item(row) for row in await self._read(work)]

    async def count(self, where: Filter) -> int:
        """How many items ``where`` matches."""
        query = count_items(where, self._dialect)

        async def work(connection: AsyncConnection) -> int:
            return int((await connection.execute(query)).scalar_one())

        return await self._read(work)

    async def aclose(self) -> None:
        """Close this reader's connections."""
        await self._engine.dispose()

    async def _read(self, work: Callable[[AsyncConnection], Awaitable[T]]) -> T:
        self._check_open()
        self._check_loop()

        async def attempt() -> T:
            async with self._engine.connect() as connection, connection.begin():
                return await work(connection)

        with self._translating():
            return await aretrying(attempt, "read")

    def _check_loop(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif loop is not self._loop:
            raise BackendError(
                "this async reader's connections belong to another event loop; "
                "make one reader per loop",
                backend="SQLAlchemyBackend",
            )
