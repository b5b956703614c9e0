"""Exports that load on first use (PEP 562), and names that moved away with a grace period.

The front door re-exports the SQL backend, whose module imports SQLAlchemy (and its
migrations alembic). Importing it eagerly would make every ``import agent_engine``, and every
CLI start, pay for a stack that users of the in-memory backend never touch. Instead the
package's ``__getattr__`` imports the defining submodule the first time one of its names is
asked for and caches the value in the package namespace, so later lookups are plain
attribute reads and ``from agent_engine import SQLAlchemyBackend`` works as before.

The same hook serves names a package no longer exports: for one release they still resolve,
with a :class:`DeprecationWarning` naming the module to import them from. They are never
cached (each use warns) and ``dir()`` leaves them out, so completion offers only the API.
"""

from __future__ import annotations

import importlib
import inspect
import warnings
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

__all__ = ["on_first_use"]


def on_first_use(
    namespace: MutableMapping[str, Any],
    lazy: Mapping[str, str],
    *,
    moved: Mapping[str, str] | None = None,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return a module's ``__getattr__`` and ``__dir__`` for the names in ``lazy`` and ``moved``.

    ``namespace`` is the module's ``globals()``; ``lazy`` maps each exported name to the
    module that defines it. ``moved`` maps each name the module no longer exports to the
    module users should import it from. ``__dir__`` lists the lazy names before they are
    loaded, so ``dir()`` and completion show the whole public API, and no moved name.
    """
    module_name = namespace["__name__"]
    gone = dict(moved or {})

    def __getattr__(name: str) -> Any:  # noqa: N807 - the PEP 562 hook's own name
        source = lazy.get(name)
        if source is not None:
            value = getattr(importlib.import_module(source), name)
            namespace[name] = value
            return value
        home = gone.get(name)
        if home is not None:
            if not _probed_by_import():
                warnings.warn(
                    f"importing {name} from {module_name} is deprecated and will stop working "
                    f"in the next release: use `from {home} import {name}`",
                    DeprecationWarning,
                    stacklevel=2,
                )
            return getattr(importlib.import_module(home), name)
        msg = f"module {module_name!r} has no attribute {name!r}"
        raise AttributeError(msg, name=name, obj=None)

    def __dir__() -> list[str]:  # noqa: N807 - the PEP 562 hook's own name
        return sorted({*namespace, *lazy})

    return __getattr__, __dir__


def _probed_by_import() -> bool:
    """Whether the hook's caller is the import system checking a ``from`` list.

    ``from package import name`` first asks the package whether ``name`` exists (to tell a
    submodule from an attribute), then reads it from the importing code. Only the read
    warns, so a moved name warns once, at the line that imports it.
    """
    frame = inspect.currentframe()
    caller = frame.f_back.f_back if frame is not None and frame.f_back is not None else None
    return caller is not None and caller.f_code.co_name == "_handle_fromlist"
