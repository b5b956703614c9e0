"""Benchmark cells, each (backend, size) measured in a process of its own.

A cell loads a store of its size, measures, and exits: neither memory nor caches (an
embedder's, a backend's, the allocator's) carry over from one cell to the next, so a cell's
figures do not depend on which ran before it.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from typing import Any

from agent_engine.memory import registry

__all__ = ["Which", "configuration_of", "in_fresh_processes"]

Which = str | registry.Configuration
"""A backend configuration of the registry, or its name."""
Cell = Callable[..., dict[str, Any]]
"""Measures one cell: called as ``cell(backend configuration, size, *args)``."""


def configuration_of(which: Which) -> registry.Configuration:
    """The configuration ``which`` is or names."""
    if isinstance(which, registry.Configuration):
        return which
    return registry.configuration(which)


def in_fresh_processes(
    cell: Cell,
    backends: Sequence[str],
    sizes: Sequence[int],
    *args: Any,
    progress: Callable[[int], None] | None = None,
) -> list[dict[str, Any]]:
    """Every (backend, size) cell's figures, backends in the order given, then sizes.

    ``cell`` must be importable by name (a module-level function): each cell runs in a new
    process started with ``spawn``, handed the configuration itself, so one registered only
    in this process is measured too. An unknown backend raises
    :class:`~agent_engine.errors.UnknownBackendError` before anything runs.
    """
    chosen = [registry.configuration(name) for name in backends]
    context = multiprocessing.get_context("spawn")
    results = []
    for configuration in chosen:
        for size in sizes:
            with context.Pool(1) as pool:
                results.append(pool.apply(cell, (configuration, size, *args)))
            if progress is not None:
                progress(1)
    return results
