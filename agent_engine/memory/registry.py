"""The backends by name: how each opens from a URL, and the configurations the benchmark builds.

A backend joins with one :func:`register_backend` call. What the registry holds is names and
import paths (``"module:attribute"``), resolved on first use: looking up a scheme or listing
the benchmark's choices imports nothing of a backend, so ``import agent_engine`` and a command
on ``memory://`` never load SQLAlchemy or FAISS. The built-in backends register at the end of
this module.

Third-party backends register either by calling :func:`register_backend` (in the process that
uses them) or through the ``agent_engine.backends`` entry-point group, whose entries name a
:class:`Backend` value; entry points are read on the first lookup, in every process, so the
benchmark's worker processes see them too.

Each :class:`Backend` says:

* ``schemes`` and ``urls``: the URL schemes ``agent-engine --db`` opens it with, and the URL
  forms its help and errors show;
* ``opener``: a function ``(url, OpenOptions) -> MemoryBackend | None`` (``None``: nothing was
  ever stored there and ``create`` was not asked, so the caller reads it as empty and leaves
  it untouched);
* ``configurations``: named ``(work folder, embedder) -> empty backend`` factories (``faiss``,
  ``faiss-hnsw``, ...), the benchmark's ``--backends`` choices; those listed in ``on_request``
  are measured only when named (the others make up its default run).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from agent_engine._log import get_logger
from agent_engine.embeddings import Embedder
from agent_engine.errors import BackendUnavailableError, UnknownBackendError, ValidationError
from agent_engine.memory.backend import MemoryBackend

__all__ = [
    "ENTRY_POINT_GROUP",
    "Backend",
    "Configuration",
    "Factory",
    "OpenOptions",
    "Opener",
    "backend_for_scheme",
    "backends",
    "configuration",
    "configurations",
    "get_backend",
    "register_backend",
    "unregister_backend",
]

ENTRY_POINT_GROUP = "agent_engine.backends"
"""The entry-point group third-party packages list their :class:`Backend` values under."""


@attrs.frozen
class OpenOptions:
    """How a command opens a store (an opener ignores what does not apply to its backend)."""

    embedder: Embedder | None = None
    create: bool = False
    """The store (database, folder, schema) may be created."""
    read_only: bool = False
    """Nothing will be written: open a connection that cannot write, where there is one."""
    statement_timeout: float | None = None
    """Seconds a database statement may run (``None``: the backend's default)."""


Opener = Callable[[str, OpenOptions], MemoryBackend | None]
"""``(url, options) -> backend``; ``None`` when nothing was ever stored at ``url`` and
``options.create`` is false (the caller then reads an empty stand-in, touching nothing)."""

Factory = Callable[[Path, Embedder], MemoryBackend]
"""``(work folder, embedder) -> an empty backend`` whose files, if any, live in the folder."""

Ref = str | Callable[..., Any]
"""A callable, or its import path ``"package.module:attribute"`` (imported on first use)."""


def _resolve(ref: Ref, owner: str) -> Any:
    """The object ``ref`` names; a missing dependency is the backend being unavailable."""
    if not isinstance(ref, str):
        return ref
    module_name, _, attribute = ref.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise BackendUnavailableError(
            f"the {owner!r} backend is unavailable in this installation ({exc}); "
            "install the dependencies it needs",
            backend=owner,
        ) from exc
    found = getattr(module, attribute, None)
    if found is None:
        raise BackendUnavailableError(f"{module_name} has no {attribute!r}", backend=owner)
    return found


def _check_ref(field: str, value: object) -> None:
    if isinstance(value, str):
        module_name, colon, attribute = value.partition(":")
        if not (module_name and colon and attribute):
            raise ValidationError(
                f"{field} must be 'package.module:attribute' or a callable, got {value!r}",
                field=field,
                value=value,
            )
    elif not callable(value):
        raise ValidationError(
            f"{field} must be an import path or a callable, got {value!r}",
            field=field,
            value=value,
        )


def _check_name(field: str, value: object) -> None:
    if not isinstance(value, str) or not value or value != value.strip().lower():
        raise ValidationError(
            f"{field} must be a non-blank lower-case name, got {value!r}", field=field, value=value
        )


@attrs.frozen
class Configuration:
    """One named way to build an empty backend in a folder (a benchmark ``--backends`` choice).

    It pickles as its import path (or its module-level function), so the benchmark hands it
    to the worker process that measures it.
    """

    name: str
    backend: str
    """The name of the registered :class:`Backend` it builds."""
    factory: Ref = attrs.field(repr=False)
    default: bool = True
    """Part of the benchmark's default run (else measured only when named)."""

    def build(self, work: Path, embedder: Embedder) -> MemoryBackend:
        """An empty backend whose files live in ``work``."""
        factory: Factory = _resolve(self.factory, self.backend)
        return factory(work, embedder)


def _configurations(
    value: Mapping[str, Ref] | Iterable[tuple[str, Ref]],
) -> tuple[tuple[str, Ref], ...]:
    return tuple(value.items() if isinstance(value, Mapping) else value)


def _names(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


@attrs.frozen
class Backend:
    """A registered backend: its name, its class, how to open it and what to build of it.

    ``cls`` and the callables may be given as import paths, so registering imports nothing.
    Build one with :func:`register_backend`, or list one under the ``agent_engine.backends``
    entry-point group.
    """

    name: str
    cls: Ref = attrs.field(repr=False)
    """The backend class, or its import path."""
    schemes: tuple[str, ...] = attrs.field(default=(), converter=_names)
    """URL schemes (before any ``+driver``) that :attr:`opener` opens."""
    urls: tuple[str, ...] = attrs.field(default=(), converter=_names)
    """URL forms shown in help and errors (``"sqlite:///PATH"``)."""
    opener: Ref | None = attrs.field(default=None, repr=False)
    """An :data:`Opener` or its import path; required when there are schemes."""
    configurations: tuple[tuple[str, Ref], ...] = attrs.field(
        default=(), converter=_configurations, repr=False
    )
    """``(name, Factory or import path)`` pairs, in the order they are listed."""
    on_request: tuple[str, ...] = attrs.field(default=(), converter=_names)
    """Configurations the benchmark measures only when named (slow to build, say)."""

    def __attrs_post_init__(self) -> None:
        _check_name("name", self.name)
        _check_ref("cls", self.cls)
        for scheme in self.schemes:
            _check_name("schemes", scheme)
        if self.schemes and self.opener is None:
            raise ValidationError(
                f"backend {self.name!r} has URL schemes but no opener", field="opener"
            )
        if self.opener is not None:
            _check_ref("opener", self.opener)
        for name, factory in self.configurations:
            _check_name("configurations", name)
            _check_ref("configurations", factory)
        unknown = set(self.on_request) - {name for name, _ in self.configurations}
        if unknown:
            raise ValidationError(
                f"on_request names no configuration of {self.name!r}: {sorted(unknown)}",
                field="on_request",
                value=sorted(unknown),
            )

    @property
    def class_name(self) -> str:
        """The backend class's name, known without importing it."""
        if isinstance(self.cls, str):
            return self.cls.rpartition(":")[2]
        return str(getattr(self.cls, "__name__", self.cls))

    def backend_class(self) -> type[MemoryBackend]:
        """The backend class (imported now when given by its path)."""
        cls: type[MemoryBackend] = _resolve(self.cls, self.name)
        return cls

    def open(self, url: str, options: OpenOptions) -> MemoryBackend | None:
        """Open ``url`` with the backend's :attr:`opener` (see :data:`Opener`)."""
        if self.opener is None:
            raise UnknownBackendError(
                f"the {self.name!r} backend is not opened from a URL",
                name=self.name,
                known=tuple(scheme for entry in backends() for scheme in entry.schemes),
            )
        opener: Opener = _resolve(self.opener, self.name)
        return opener(url, options)


_lock = threading.RLock()
_registry: dict[str, Backend] = {}
_plugins_loaded = False


def register_backend(
    name: str | Backend,
    cls: Ref | None = None,
    *,
    schemes: tuple[str, ...] = (),
    urls: tuple[str, ...] = (),
    opener: Ref | None = None,
    configurations: Mapping[str, Ref] | None = None,
    on_request: tuple[str, ...] = (),
) -> Backend:
    """Register a backend (a :class:`Backend`, or the fields of one) and return its entry.

    A name, URL scheme or configuration name that another backend already holds is refused
    with a :class:`~agent_engine.errors.ValidationError`.
    """
    if isinstance(name, Backend):
        entry = name
    else:
        if cls is None:
            raise ValidationError("register_backend needs the backend class", field="cls")
        entry = Backend(
            name,
            cls,
            schemes=schemes,
            urls=urls,
            opener=opener,
            configurations=configurations or {},
            on_request=on_request,
        )
    with _lock:
        taken_schemes = {s for other in _registry.values() for s in other.schemes}
        taken_configurations = {c for other in _registry.values() for c, _ in other.configurations}
        clash = (
            ("name", {entry.name} & set(_registry)),
            ("schemes", set(entry.schemes) & taken_schemes),
            ("configurations", {c for c, _ in entry.configurations} & taken_configurations),
        )
        for field, taken in clash:
            if taken:
                raise ValidationError(
                    f"backend {entry.name!r}: {field} taken: {', '.join(sorted(taken))}",
                    field=field,
                    value=sorted(taken),
                )
        _registry[entry.name] = entry
    return entry


def unregister_backend(name: str) -> None:
    """Remove the backend registered as ``name`` (tests use it to clean up after themselves)."""
    with _lock:
        if _registry.pop(name, None) is None:
            raise _unknown("backend", name, tuple(_registry))


def _load_plugins() -> None:
    """Register the entry points of ``agent_engine.backends`` once, on the first lookup.

    A plugin that fails to load is logged and skipped: one broken package must not take the
    built-in backends down with it.
    """
    global _plugins_loaded  # noqa: PLW0603 - read once per process
    with _lock:
        if _plugins_loaded:
            return
        _plugins_loaded = True
        for point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            try:
                entry = point.load()
                if not isinstance(entry, Backend):
                    raise ValidationError(  # noqa: TRY301 - reported like any load failure
                        f"{point.value} is not an agent_engine Backend", field="entry_point"
                    )
                if _registry.get(entry.name) is not entry:  # not registered at its import
                    register_backend(entry)
            except Exception as exc:  # noqa: BLE001 - any plugin failure is logged, not raised
                get_logger(backend=point.name).warning(
                    "backend_plugin_failed", entry_point=point.value, error=str(exc)
                )


def backends() -> tuple[Backend, ...]:
    """Every registered backend, in the order it registered."""
    _load_plugins()
    with _lock:
        return tuple(_registry.values())


def _unknown(what: str, name: str, known: tuple[str, ...]) -> UnknownBackendError:
    listed = ", ".join(known) or "none"
    return UnknownBackendError(
        f"no {what} {name!r} is registered; known: {listed}", name=name, known=known
    )


def get_backend(name: str) -> Backend:
    """The backend registered as ``name``; an :class:`UnknownBackendError` lists the others."""
    for entry in backends():
        if entry.name == name:
            return entry
    raise _unknown("backend", name, tuple(entry.name for entry in backends()))


def backend_for_scheme(scheme: str) -> Backend:
    """The backend that opens URLs of ``scheme`` (compared in lower case)."""
    wanted = scheme.lower()
    for entry in backends():
        if wanted in entry.schemes:
            return entry
    raise _unknown("URL scheme", scheme, tuple(s for entry in backends() for s in entry.schemes))


def configurations() -> tuple[Configuration, ...]:
    """Every registered configuration, backend by backend in registration order."""
    return tuple(
        Configuration(name, entry.name, factory, default=name not in entry.on_request)
        for entry in backends()
        for name, factory in entry.configurations
    )


def configuration(name: str) -> Configuration:
    """The configuration called ``name``; an :class:`UnknownBackendError` lists the others."""
    found = {c.name: c for c in configurations()}
    if name not in found:
        raise _unknown("backend configuration", name, tuple(found))
    return found[name]


# The built-in backends, in the order the command's help and the benchmark list them.
register_backend(
    "memory",
    "agent_engine.memory.inmemory:InMemoryBackend",
    schemes=("memory",),
    urls=("memory://",),
    opener="agent_engine.memory.inmemory:open_url",
    configurations={"memory": "agent_engine.memory.inmemory:empty"},
)
register_backend(
    "sql",
    "agent_engine.memory.sql:SQLAlchemyBackend",
    schemes=("sqlite", "postgresql", "postgres"),
    urls=("sqlite:///PATH", "postgresql+psycopg://USER@HOST/DB"),
    opener="agent_engine.memory.sql._open:open_url",
    configurations={
        "sqlite": "agent_engine.memory.sql._open:sqlite_file",
        "pgvector": "agent_engine.memory.sql._pgserver:temporary_pgvector",
        "pgvector-fulltext": "agent_engine.memory.sql._pgserver:temporary_pgvector_fulltext",
    },
    on_request=("pgvector", "pgvector-fulltext"),
)
register_backend(
    "faiss",
    "agent_engine.memory.faiss:FaissBackend",
    configurations={
        "faiss": "agent_engine.memory.faiss:flat_in_memory",
        "faiss-hnsw": "agent_engine.memory.faiss:hnsw_in_memory",
        "faiss-sqlite": "agent_engine.memory.faiss:flat_over_sqlite",
    },
    on_request=("faiss-hnsw",),
)
register_backend(
    "redis",
    "agent_engine.memory.redis:RedisBackend",
    schemes=("redis", "rediss"),
    urls=("redis://HOST:6379/0?prefix=P&ttl=SECONDS",),
    opener="agent_engine.memory.redis:open_url",
    configurations={"redis": "agent_engine.memory.redis:temporary"},
    on_request=("redis",),
)
