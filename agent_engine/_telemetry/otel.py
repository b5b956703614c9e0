"""The OpenTelemetry side: one telemetry's tracer and instruments, and one operation's span.

Imported only once there is somewhere to report (``Telemetry._resolved``), so the API
stays unloaded in processes that never use it. Only the API: what becomes of the spans and
measurements (sampled, exported, dropped) is the SDK's, which the application configures.
"""

from __future__ import annotations

import contextvars
import json
import time
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any, Literal, Self

import attrs
from opentelemetry import context, metrics, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from agent_engine._telemetry import names
from agent_engine._telemetry.config import IN_MEMORY_OPERATION, AttributeValue
from agent_engine._version import __version__

__all__ = ["Operation", "Reporter"]

_SCOPE = "agent_engine"
"""The instrumentation scope of our tracer and meter: the library's import name."""

_SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Duration buckets: an in-memory add takes a fraction of a millisecond, a cold build seconds.
(The SDK's default buckets, 0 to 10 000, are made for milliseconds.)"""
_SHARES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)
_TOKENS = (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)


@attrs.frozen
class Reporter:
    """The tracer and instruments one :class:`Telemetry` reports with, made once."""

    tracer: trace.Tracer
    record_text: bool
    memory_duration: metrics.Histogram
    build_duration: metrics.Histogram
    budget_utilization: metrics.Histogram
    token_usage: metrics.Histogram
    items: metrics.Counter

    @classmethod
    def make(
        cls,
        tracer_provider: trace.TracerProvider | None,
        meter_provider: metrics.MeterProvider | None,
        *,
        record_text: bool,
    ) -> Reporter:
        """The tracer and instruments of these providers (``None``: the global ones)."""
        meter = metrics.get_meter(_SCOPE, __version__, meter_provider)
        return cls(
            tracer=trace.get_tracer(_SCOPE, __version__, tracer_provider),
            record_text=record_text,
            memory_duration=meter.create_histogram(
                names.MEMORY_DURATION,
                unit="s",
                description="Duration of a memory store's operations (add, search, promote, "
                "compact).",
                explicit_bucket_boundaries_advisory=_SECONDS,
            ),
            build_duration=meter.create_histogram(
                names.BUILD_DURATION,
                unit="s",
                description="Duration of context builds.",
                explicit_bucket_boundaries_advisory=_SECONDS,
            ),
            budget_utilization=meter.create_histogram(
                names.BUDGET_UTILIZATION,
                unit="1",
                description="Tokens a built context uses, over its budget.",
                explicit_bucket_boundaries_advisory=_SHARES,
            ),
            token_usage=meter.create_histogram(
                names.TOKEN_USAGE,
                unit="{token}",
                description="Tokens a built context uses, per tier.",
                explicit_bucket_boundaries_advisory=_TOKENS,
            ),
            items=meter.create_counter(
                names.ITEMS,
                unit="{item}",
                description="Candidates of context builds, selected or omitted, per tier.",
            ),
        )

    def operation(
        self,
        name: str,
        attributes: Mapping[str, AttributeValue],
        *,
        kind: Literal["memory", "build"],
    ) -> Operation:
        """The span and duration of one operation (see :func:`~.config.operation`)."""
        return Operation(self, name, attributes, kind)


_MEMORY_METRIC_KEYS = (names.OPERATION_NAME, names.METHOD, names.TIER)
"""What a store operation's duration is broken down by: few values each, never an id."""


class Operation:
    """One operation's span (current while it runs) and, when it ends, its duration metric.

    Attributes are set only on a span that records (a sampled span of a configured SDK):
    ``recording`` says whether; ``captures_text`` whether text may go on it too.
    """

    __slots__ = (
        "_attributes",
        "_histogram",
        "_inside",
        "_kind",
        "_name",
        "_started",
        "_token",
        "metric_attributes",
        "recording",
        "reporter",
        "span",
    )

    def __init__(
        self,
        reporter: Reporter,
        name: str,
        attributes: Mapping[str, AttributeValue],
        kind: Literal["memory", "build"],
    ) -> None:
        self.reporter = reporter
        self._name = name
        self._attributes = attributes
        self.span: trace.Span = trace.INVALID_SPAN
        self.recording = False
        self._kind = kind
        self._inside: contextvars.Token[bool] | None = None
        if kind == "memory":
            self._histogram = reporter.memory_duration
            self.metric_attributes: dict[str, AttributeValue] = {
                key: attributes[key] for key in _MEMORY_METRIC_KEYS if key in attributes
            }
        else:
            self._histogram = reporter.build_duration
            self.metric_attributes = {}
        self._started = 0.0
        self._token: contextvars.Token[context.Context] | None = None

    @property
    def captures_text(self) -> bool:
        """Whether this span records and its telemetry lets it carry text."""
        return self.recording and self.reporter.record_text

    def __enter__(self) -> Self:
        self.span = self.reporter.tracer.start_span(
            self._name, kind=SpanKind.INTERNAL, attributes=self._attributes
        )
        self.recording = self.span.is_recording()
        if self._kind == "memory":
            self._inside = IN_MEMORY_OPERATION.set(True)
        if self.span.get_span_context().is_valid:  # a no-op span (no SDK) changes no context
            self._token = context.attach(trace.set_span_in_context(self.span))
        self._started = time.perf_counter()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> Literal[False]:
        seconds = time.perf_counter() - self._started
        if self._token is not None:
            context.detach(self._token)
        if self._inside is not None:
            IN_MEMORY_OPERATION.reset(self._inside)
        try:
            if exc is not None:
                error = _error_type(exc)
                self.metric_attributes[names.ERROR_TYPE] = error
                self.span.set_attribute(names.ERROR_TYPE, error)
                # The message may quote what memory holds: it is text, recorded only if allowed.
                self.span.set_status(Status(StatusCode.ERROR))
                if self.reporter.record_text:
                    self.span.record_exception(exc)
        finally:
            self.span.end()
        self._histogram.record(seconds, self.metric_attributes)
        return False

    def set(self, attributes: Mapping[str, AttributeValue]) -> None:
        """Add ``attributes`` to the span (if it records)."""
        if self.recording:
            self.span.set_attributes(attributes)

    def set_records(self, records: Iterable[Mapping[str, Any]]) -> None:
        """``gen_ai.memory.records``, as JSON, when text may be recorded (else nothing)."""
        if self.captures_text:
            self.span.set_attribute(names.RECORDS, json.dumps(list(records), ensure_ascii=False))

    def set_query(self, query: object) -> None:
        """``gen_ai.memory.query.text``, when the query is text and text may be recorded."""
        if isinstance(query, str) and self.captures_text:
            self.span.set_attribute(names.QUERY_TEXT, query)


def _error_type(exc: BaseException) -> str:
    """The exception's class, fully qualified (``error.type``): never its message."""
    kind = type(exc)
    return (
        kind.__qualname__
        if kind.__module__ == "builtins"
        else f"{kind.__module__}.{kind.__qualname__}"
    )
