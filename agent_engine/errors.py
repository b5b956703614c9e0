"""Every error agent_engine raises across its public API.

Catch :class:`AgentEngineError` to handle anything from the library, or a leaf to handle one
situation. Where an error plainly *is* a builtin kind (a bad value, a missing key), it also
inherits from that builtin so generic handlers keep working.

The tree::

    AgentEngineError
    ├── ValidationError (ValueError)          a value broke a model invariant
    │   ├── FilterError                       a filter or order_by is malformed
    │   │   └── FilterTooLargeError           a filter is past the language's size limits
    │   ├── DimensionMismatchError            a vector has the wrong length
    │   ├── EmbedderMismatchError             a store's vectors were made by another model
    │   ├── LifecycleStateError               not possible in the item's state (pinned, history)
    │   └── StoreNotEmptyError                a copy's target already holds items
    ├── ItemNotFoundError (LookupError)       no item with that id (in that scope)
    ├── ConflictNotFoundError (LookupError)   no recorded conflict with that id (in that scope)
    ├── DuplicateItemError                    add() of an id that already exists
    ├── ConfirmationDeclined                  a high-risk write was not confirmed
    ├── EmbeddingError                        no model, or the model failed
    ├── ExtractionError                       an extractor's answer holds no memories
    ├── SummaryError                          a summarizer's answer is not a summary
    └── BackendError                          storage failed (driver errors wrap into this)
        ├── BackendUnavailableError           cannot reach or open the store
        │   └── UnknownBackendError (LookupError) no backend registered by that name or scheme
        ├── SchemaVersionError                database schema is older or newer than the code
        ├── ReembedRequiredError              a store's vectors are being (or must be) re-embedded
        ├── IndexCorruptError                 a saved vector index cannot be used
        ├── CopyIncompleteError               a copied store does not match its source
        └── QueryTimeoutError (TimeoutError)  a statement ran past the statement timeout

Driver exceptions (SQLAlchemy, FAISS, sqlite3) never reach callers: backends translate them
at their boundary with ``raise ... from exc`` so the cause stays in the traceback.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AccessDeniedError",
    "AgentEngineError",
    "BackendError",
    "BackendUnavailableError",
    "CheckpointNotFoundError",
    "ConfirmationDeclined",
    "ConflictNotFoundError",
    "CopyIncompleteError",
    "DimensionMismatchError",
    "DuplicateItemError",
    "EmbedderMismatchError",
    "EmbeddingError",
    "ExportFileError",
    "ExtractionError",
    "FilterError",
    "FilterTooLargeError",
    "IndexCorruptError",
    "ItemNotFoundError",
    "LifecycleStateError",
    "QueryTimeoutError",
    "ReembedRequiredError",
    "SchemaVersionError",
    "StoreNotEmptyError",
    "SummaryError",
    "UnknownAgentError",
    "UnknownBackendError",
    "ValidationError",
]


class AgentEngineError(Exception):
    """Root of every error agent_engine raises on purpose.

    Every one survives pickling with its message and attributes: an error raised in a worker
    process (a benchmark cell, a process pool, a task queue) reaches its caller as itself.
    Pickle rebuilds an exception by calling its class with ``args`` alone, which the errors
    with keyword-only details (``timeout``, ``field``, ...) refuse; the default would fail
    while unpickling, in the receiving process, where a pool's result thread dies of it and
    the caller waits forever.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuilt, (type(self), self.args, dict(self.__dict__)))


def _rebuilt(
    cls: type[AgentEngineError], args: tuple[Any, ...], state: dict[str, Any]
) -> AgentEngineError:
    """An error of ``cls`` with ``args`` and attributes ``state``, not calling ``__init__``."""
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


class ValidationError(AgentEngineError, ValueError):
    """A value given to agent_engine breaks an invariant.

    ``field`` names what was wrong and ``value`` holds the offending value, so callers that
    collect errors (a form, an import job) can point at the culprit without parsing text.
    """

    def __init__(self, message: str, *, field: str | None = None, value: Any = None) -> None:
        super().__init__(message)
        self.field = field
        self.value = value


class UnknownAgentError(ValidationError, LookupError):
    """A grant names an agent its project never registered: nothing was granted.

    ``field`` is ``"agent"``, ``value`` the agent's id; ``realm`` is the project's namespace.
    """

    def __init__(self, agent: str, *, realm: str) -> None:
        super().__init__(
            f"no agent {agent!r} is registered in {realm}; register it first",
            field="agent",
            value=agent,
        )
        self.agent = agent
        self.realm = realm


class FilterError(ValidationError):
    """A filter document, operator, field or ``order_by`` is not part of the filter language.

    Raised instead of returning an empty result: a typo in a filter must not look like
    "nothing matched".
    """


class FilterTooLargeError(FilterError):
    """A filter is past one of the size limits of the filter language (``docs/filters.md``).

    The limits keep the cost of compiling and planning any filter small on every backend, so
    one request cannot occupy the database. ``field`` names the field whose list is too long
    (``None`` when the whole filter is), ``limit`` the limit and ``size`` what was given.
    """

    def __init__(self, message: str, *, field: str | None, limit: int, size: int) -> None:
        super().__init__(message, field=field)
        self.limit = limit
        self.size = size


class DimensionMismatchError(ValidationError):
    """A vector's length differs from the dimension the backend or embedder works in.

    Also raised when a store is opened with an embedder of another dimension than the one
    that made its vectors.
    """


class EmbedderMismatchError(ValidationError):
    """A store's vectors were made by another embedder of the same dimension.

    Its vectors and the new embedder's would compare as noise, so the store refuses the
    embedder until it is re-embedded. ``stored`` and ``given`` are the two
    :class:`~agent_engine.embeddings.EmbedderIdentity` values.
    """

    def __init__(self, message: str, *, stored: Any, given: Any) -> None:
        super().__init__(message, field="embedder", value=given)
        self.stored = stored
        self.given = given


class LifecycleStateError(ValidationError):
    """An operation does not apply to an item in its lifecycle state.

    Archiving a pinned item, restoring or editing a superseded version (history is read-only),
    superseding an item by itself: ``field`` names the item's state field and ``value`` the
    id. Nothing is changed.
    """


class StoreNotEmptyError(ValidationError):
    """A store was given as the target of a copy but already holds items (or a journal).

    Copying into it would mix two memories, so nothing is written. ``target`` names the
    store and ``count`` says how many items it holds.
    """

    def __init__(self, message: str, *, target: str, count: int) -> None:
        super().__init__(message, field="target", value=target)
        self.target = target
        self.count = count


class ExportFileError(ValidationError):
    """An export file cannot be imported; nothing of it was.

    Truncated, corrupted, of another format version, or holding an item the target holds
    otherwise (two memories under one id).

    ``line`` is the file's line at fault (1-based; ``None`` when the file as a whole is).
    """

    def __init__(
        self, message: str, *, field: str | None = None, value: Any = None, line: int | None = None
    ) -> None:
        super().__init__(message, field=field, value=value)
        self.line = line


class ItemNotFoundError(AgentEngineError, LookupError):
    """No item with this id exists, or it exists outside the caller's scope.

    Tier stores raise this for ids that belong to another namespace too, so an id alone
    never reveals that another project's item exists.
    """

    def __init__(self, item_id: str, *, namespace: str | None = None) -> None:
        where = f" in namespace {namespace!r}" if namespace else ""
        super().__init__(f"no item with id {item_id!r}{where}")
        self.item_id = item_id
        self.namespace = namespace


class CheckpointNotFoundError(AgentEngineError, LookupError):
    """No checkpoint has this id, or it belongs to another scope (which it never reveals)."""

    def __init__(self, checkpoint_id: str, *, namespace: str | None = None) -> None:
        where = f" in namespace {namespace!r}" if namespace else ""
        super().__init__(f"no checkpoint with id {checkpoint_id!r}{where}")
        self.checkpoint_id = checkpoint_id
        self.namespace = namespace


class ConflictNotFoundError(AgentEngineError, LookupError):
    """No recorded conflict has this id, or it belongs to another scope.

    As with items, a tier store raises this for another scope's conflict too, so a conflict
    id alone never reveals what another project holds.
    """

    def __init__(self, conflict_id: str, *, namespace: str | None = None) -> None:
        where = f" in namespace {namespace!r}" if namespace else ""
        super().__init__(f"no conflict with id {conflict_id!r}{where}")
        self.conflict_id = conflict_id
        self.namespace = namespace


class DuplicateItemError(AgentEngineError):
    """``add``/``add_many`` was given an id that is already stored (or twice in one batch).

    Adding never overwrites: use ``update`` to change an item.
    """

    def __init__(self, item_id: str) -> None:
        super().__init__(f"an item with id {item_id!r} already exists; use update() to change it")
        self.item_id = item_id


class ConfirmationDeclined(AgentEngineError):  # noqa: N818 - the name reads as the event it reports.
    """The user (through the confirmation callback) did not approve a high-risk write.

    Nothing was written. ``operation`` names what was refused.
    """

    def __init__(self, operation: str, message: str | None = None) -> None:
        super().__init__(message or f"confirmation declined: {operation}")
        self.operation = operation


class AccessDeniedError(AgentEngineError, PermissionError):
    """An agent asked a pool for what its grant does not allow; nothing was read or written.

    The message names the agent, the pool as asked for and what was wanted, and nothing the
    pool holds: it reads the same whether the pool, or the item asked for, exists or not, so
    an agent without a grant learns nothing of a pool.
    """

    def __init__(self, agent: str, pool: str, wanted: str) -> None:
        super().__init__(f"agent {agent!r} may not {wanted} pool {pool!r}")
        self.agent = agent
        self.pool = pool
        self.wanted = wanted


class EmbeddingError(AgentEngineError):
    """No embedding model could be loaded, or the model failed on the input."""


class ExtractionError(AgentEngineError):
    """An extractor's answer could not be read as memories (no JSON array in it)."""


class SummaryError(AgentEngineError):
    """A summarizer answered something that is not a summary (not text, or nothing).

    A build contains it unless strict: the package's summary names it and the fallback
    summarizer writes the summary instead. ``summarizer`` names the one that failed.
    """

    def __init__(self, message: str, *, summarizer: str | None = None) -> None:
        super().__init__(message)
        self.summarizer = summarizer


class BackendError(AgentEngineError):
    """The storage layer failed. ``backend`` names the backend class that raised it."""

    def __init__(self, message: str, *, backend: str | None = None) -> None:
        super().__init__(message)
        self.backend = backend


class BackendUnavailableError(BackendError):
    """The store cannot be reached or opened (bad URL, server down, unreadable file)."""


class UnknownBackendError(BackendUnavailableError, LookupError):
    """No backend is registered under this name, URL scheme or configuration name.

    ``name`` is what was asked for and ``known`` what is registered, so a caller can offer
    the choices (``agent_engine.memory.registry``).
    """

    def __init__(self, message: str, *, name: str, known: tuple[str, ...]) -> None:
        super().__init__(message)
        self.name = name
        self.known = known


class SchemaVersionError(BackendError):
    """The database schema revision does not match what this version of agent_engine expects.

    ``current`` is the database's revision (``None`` for an empty database) and ``expected``
    the code's head revision. An older schema can be upgraded; a newer or unknown one is
    refused and never written to.
    """

    def __init__(
        self,
        message: str,
        *,
        current: str | None = None,
        expected: str | None = None,
        backend: str | None = None,
    ) -> None:
        super().__init__(message, backend=backend)
        self.current = current
        self.expected = expected


class ReembedRequiredError(BackendError):
    """The store's vectors are being replaced, or must be before they can be searched.

    A re-embedding is running or was interrupted (``target`` is the embedder identity it
    moves to), or the store holds vectors of several sizes, written before agent_engine
    recorded which embedder made them (``target`` is ``None``). Vector search and writes
    that carry vectors are refused until ``reembed`` (``agent-engine db reembed``) finishes;
    everything else keeps working.
    """

    def __init__(self, message: str, *, target: Any = None, backend: str | None = None) -> None:
        super().__init__(message, backend=backend)
        self.target = target


class IndexCorruptError(BackendError):
    """A saved vector index is unreadable or out of step with its record store."""


class CopyIncompleteError(BackendError):
    """A copied store's counts differ from its source's once the copy was written.

    The target is incomplete (drop it and copy again); the source was only read.
    ``differences`` lists what differs, one sentence each.
    """

    def __init__(
        self, message: str, *, differences: tuple[str, ...], backend: str | None = None
    ) -> None:
        super().__init__(message, backend=backend)
        self.differences = differences


class QueryTimeoutError(BackendError, TimeoutError):
    """A statement ran past the backend's statement timeout and was cancelled.

    Its transaction was rolled back, so nothing of the call was written. ``timeout`` is the
    limit in seconds (``SQLAlchemyBackend(statement_timeout=...)``).
    """

    def __init__(self, message: str, *, timeout: float, backend: str | None = None) -> None:
        super().__init__(message, backend=backend)
        self.timeout = timeout
