"""Running the synchronous core off the event loop, on threads the async twins own.

The core is synchronous and thread-safe (one assembler serves many threads; the SQL backend
pools connections, FAISS, numpy, torch and the drivers release the GIL while they work). An
async twin hands each call to a thread of its own pool, so the loop only ever waits on a
future. A cancelled call either never started (it is taken off the queue) or runs to its end:
every write of the core is whole (one transaction, or one lock held), and the caller hears of
the cancellation only once the call has finished, so no write lands after its caller moved on.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
from collections.abc import Callable, Coroutine
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, Protocol, Self, TypeVar

from agent_engine.errors import ValidationError

__all__ = ["AsyncClosing", "Offload", "twin"]

P = ParamSpec("P")
R = TypeVar("R")


class Offload:
    """A pool of worker threads that async callers await (``workers`` threads at most)."""

    def __init__(self, workers: int = 4) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValidationError(
                "workers must be a positive integer", field="workers", value=workers
            )
        self.workers = workers
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="agent-engine")

    async def run(self, function: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        """``function(*args, **kwargs)`` on a worker thread; see the module for cancellation."""
        # The caller's context variables go along, as with asyncio.to_thread: an enclosing
        # OpenTelemetry span parents the call's spans, and structlog's bound context holds.
        context = contextvars.copy_context()
        call = functools.partial(function, *args, **kwargs)
        future: Future[R] = self._pool.submit(context.run, call)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            if not future.cancel():  # already running: it ends whole before the caller goes on
                await _until_done(future)
            raise

    def close(self) -> None:
        """Run the calls already made, then stop the threads (later calls raise RuntimeError).

        A call waiting for a worker is not dropped: its caller made it and awaits it.
        """
        self._pool.shutdown(wait=True)

    async def aclose(self) -> None:
        """:meth:`close`, awaited: the wait for the calls under way does not block the loop."""
        await asyncio.to_thread(self.close)


async def _until_done(future: Future[Any]) -> None:
    """Wait for a running call to end, however often the waiting task is cancelled again."""
    while not future.done():
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.shield(asyncio.wrap_future(future))


class _Twinned(Protocol):
    """What a twin's methods need of their instance: the synchronous object and the pool."""

    @property
    def sync(self) -> Any:
        """The synchronous object the twin wraps."""

    @property
    def offload(self) -> Offload:
        """The pool the twin's calls run on."""


def twin(
    method: Callable[Concatenate[Any, P], R],
) -> Callable[Concatenate[_Twinned, P], Coroutine[Any, Any, R]]:
    """An ``async def`` twin of a synchronous method: same arguments, awaited on the pool.

    The twin calls the method of the same name on the instance's ``sync`` object, so a
    subclass's override is the one that runs.
    """
    name = method.__name__

    async def call(self: _Twinned, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self.offload.run(getattr(self.sync, name), *args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"Async twin of ``{method.__qualname__}``: see it for what it does."
    return call


class AsyncClosing:
    """``async with`` for a twin: leaving the block awaits the twin's ``aclose``."""

    async def aclose(self) -> None:
        """Release what the twin holds (each twin says what)."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()
