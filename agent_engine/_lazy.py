"""Exports that load on first use (PEP 562), so importing the package stays light.

The front door re-exports the SQL backend, whose module imports SQLAlchemy (and its
migrations alembic). Importing it eagerly would make every ``import agent_engine``, and every
CLI start, pay for a stack that users of the in-memory backend never touch. Instead the
package's ``__getattr__`` imports the defining submodule the first time one of its names is
asked for and caches the value in the package namespace, so later lookups are plain
attribute reads and ``from agent_engine import SQLAlchemyBackend`` works as before.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

__all__ = ["on_first_use"]


def on_first_use(
    namespace: MutableMapping[str, Any], lazy: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return a module's ``__getattr__`` and ``__dir__`` for the names in ``lazy``.

    ``namespace`` is the module's ``globals()``; ``lazy`` maps each exported name to the
    module that defines it. ``__dir__`` lists the lazy names before they are loaded, so
    ``dir()`` and completion show the whole public API.
    """
    module_name = namespace["__name__"]

    def __getattr__(name: str) -> Any:  # noqa: N807 - the PEP 562 hook's own name
        source = lazy.get(name)
        if source is None:
            msg = f"module {module_name!r} has no attribute {name!r}"
            raise AttributeError(msg, name=name, obj=None)
        value = getattr(importlib.import_module(source), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:  # noqa: N807 - the PEP 562 hook's own name
        return sorted({*namespace, *lazy})

    return __getattr__, __dir__
