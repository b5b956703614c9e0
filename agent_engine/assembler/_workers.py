"""The thread pool a build runs its vector searches on while BM25 scores in the caller.

FAISS, numpy and the database drivers release the GIL, so a tier's vector search (and the
query embedding before it) overlaps with its BM25 scoring. One pool serves every assembler of
the process; a forked child starts without it, since the parent's worker threads do not
exist there and a task handed to them would never run.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

__all__ = ["search_pool"]

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def search_pool() -> ThreadPoolExecutor:
    """The process's pool (created on first use; as many workers as concurrent.futures picks)."""
    global _pool  # noqa: PLW0603 - one pool per process is the point
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(thread_name_prefix="agent-engine-search")
        return _pool


def _forget_in_child() -> None:
    global _pool, _lock
    _pool, _lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
