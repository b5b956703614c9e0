"""Where a store reports its operations, and the one check each operation makes.

A :class:`Telemetry` names the OpenTelemetry providers a store's spans and metrics go to
(the application's global ones by default) and whether they may carry text. Stores hold one
(``TierStore(telemetry=...)``, ``MemoryStores(telemetry=...)``; ``None`` is off), as they hold
their redaction and merge policies: settings of an object, not of the process.

OpenTelemetry is imported at the first operation that has somewhere to report, never at
``import agent_engine``. With the default providers that means once the application itself
has imported ``opentelemetry.trace``: a process that never did cannot have configured an SDK,
so there is nothing to report to, and loading the API (about 50 ms, its context loads entry
points) would be paid for nothing. Without the API installed every operation is a no-op.
"""

from __future__ import annotations

import contextvars
import sys
import threading
import types
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Final, Literal

from agent_engine.errors import ValidationError

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

    from agent_engine._telemetry.otel import Operation, Reporter

__all__ = ["DEFAULT_TELEMETRY", "NO_OPERATION", "Telemetry", "operation"]

AttributeValue = str | bool | int | float | list[str]
"""What our spans' and metrics' attributes hold (a subset of OpenTelemetry's)."""


class Telemetry:
    """Where a store's spans and metrics go (OpenTelemetry), and whether they may carry text.

    ``tracer_provider`` and ``meter_provider``: the providers to report to; ``None`` (the
    default) means the application's global ones, as ``trace.get_tracer_provider()`` returns
    them at the time of each report. Until the application configures an SDK those are
    OpenTelemetry's no-op providers: nothing is recorded, nothing leaves the process.

    ``record_text``: whether spans may carry what memory holds and what it was asked: item
    text (as stored, after redaction) and queries, in the conventions' opt-in attributes
    ``gen_ai.memory.records`` and ``gen_ai.memory.query.text``, and exceptions' messages.
    Off by default: a trace backend is rarely a place entitled to a user's memories.
    """

    __slots__ = (
        "_lock",
        "_reporter",
        "_unavailable",
        "meter_provider",
        "record_text",
        "tracer_provider",
    )

    def __init__(
        self,
        *,
        record_text: bool = False,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
    ) -> None:
        if not isinstance(record_text, bool):
            raise ValidationError(
                f"record_text must be True or False, got {record_text!r}",
                field="record_text",
                value=record_text,
            )
        for field, provider, kind, method in (
            ("tracer_provider", tracer_provider, "TracerProvider", "get_tracer"),
            ("meter_provider", meter_provider, "MeterProvider", "get_meter"),
        ):
            if provider is not None and not callable(getattr(provider, method, None)):
                raise ValidationError(
                    f"{field} must be an OpenTelemetry {kind} (with {method}()) or None, "
                    f"got {type(provider).__name__}",
                    field=field,
                    value=provider,
                )
        self.record_text: Final = record_text
        self.tracer_provider: Final = tracer_provider
        self.meter_provider: Final = meter_provider
        self._reporter: Reporter | None = None
        self._unavailable = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"Telemetry(record_text={self.record_text!r}, "
            f"tracer_provider={self.tracer_provider!r}, meter_provider={self.meter_provider!r})"
        )

    def _resolved(self) -> Reporter | None:
        """The tracer and instruments to report with; ``None`` while there is nowhere to report.

        Made once, at the first call that finds the OpenTelemetry API loaded (or explicit
        providers given), and kept: a global provider set later is still reached, through
        the proxies the API hands out before one is set. An API that fails to load is not
        tried again.
        """
        made = self._reporter
        if made is not None or self._unavailable:
            return made
        explicit = self.tracer_provider is not None or self.meter_provider is not None
        if not explicit and not isinstance(
            sys.modules.get("opentelemetry.trace"), types.ModuleType
        ):
            return None  # never imported (or blocked): no SDK can be configured
        with self._lock:
            if self._reporter is None and not self._unavailable:
                try:
                    from agent_engine._telemetry import otel  # noqa: PLC0415 - loads the API
                except ImportError:
                    self._unavailable = True
                    return None
                self._reporter = otel.Reporter.make(
                    self.tracer_provider, self.meter_provider, record_text=self.record_text
                )
            return self._reporter


DEFAULT_TELEMETRY = Telemetry()
"""What stores report with unless given another: the global providers, no text."""


class _NoOperation(AbstractContextManager[None]):
    """What an operation runs in when there is nowhere to report: nothing, one shared object."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc_info: object) -> Literal[False]:
        return False


NO_OPERATION: Final = _NoOperation()
"""The context of an operation that reports nothing."""

IN_MEMORY_OPERATION: Final = contextvars.ContextVar("agent_engine_memory_operation", default=False)
"""Whether a store operation is reporting in this context: the operations it runs on its way
(an add's search for contradictions) are its own work, not operations of their own."""


def operation(
    telemetry: Telemetry | None,
    name: str,
    attributes: Mapping[str, AttributeValue],
    *,
    kind: Literal["memory", "build"] = "memory",
) -> AbstractContextManager[Operation | None]:
    """A span ``name`` around what the ``with`` block does, and its duration as a metric.

    The block gets the :class:`~agent_engine._telemetry.otel.Operation` to add attributes to,
    or ``None`` when ``telemetry`` is ``None`` or has nowhere to report: then this is one
    check and a shared no-op context, whatever the block does.

    ``kind`` picks the duration histogram: ``memory`` (a store's operation; ``attributes``
    name its operation and tier, which the metric carries too) or ``build`` (a context build,
    whose metric attributes the block sets). A store operation inside another reports
    nothing of its own: its time is the outer one's (the searches a build runs are reported,
    each its own operation under the build's span).
    """
    reporter = telemetry._resolved() if telemetry is not None else None  # noqa: SLF001 - ours
    if reporter is None or (kind == "memory" and IN_MEMORY_OPERATION.get()):
        return NO_OPERATION
    return reporter.operation(name, attributes, kind=kind)
