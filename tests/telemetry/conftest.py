"""Telemetry tests read back what was reported through the real OpenTelemetry SDK.

Each test gets its own (non-global) tracer and meter providers, an in-memory span exporter
and an in-memory metric reader: nothing leaves the process, and no test sees another's spans.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agent_engine import HashingEmbedder, Telemetry


@attrs.define
class Reported:
    """Where one test's telemetry goes, and what arrived there."""

    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    tracer_provider: TracerProvider
    meter_provider: MeterProvider

    def telemetry(self, *, record_text: bool = False) -> Telemetry:
        """A ``Telemetry`` reporting here."""
        return Telemetry(
            tracer_provider=self.tracer_provider,
            meter_provider=self.meter_provider,
            record_text=record_text,
        )

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        """The finished spans (of ``name``), in the order they ended."""
        return [s for s in self.exporter.get_finished_spans() if name is None or s.name == name]

    def span(self, name: str) -> ReadableSpan:
        """The one finished span of ``name``."""
        (found,) = self.spans(name)
        return found

    def clear(self) -> None:
        """Forget the spans so far (metrics are cumulative: read them as differences)."""
        self.exporter.clear()

    def points(self, metric: str) -> list[Any]:
        """The data points of ``metric`` collected now (none when it was never recorded)."""
        data = self.reader.get_metrics_data()
        if data is None:
            return []
        return [
            point
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for found in scope.metrics
            if found.name == metric
            for point in found.data.data_points
        ]

    def metric_names(self) -> set[str]:
        """Every metric reported with at least one data point."""
        data = self.reader.get_metrics_data()
        if data is None:
            return set()
        return {
            found.name
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for found in scope.metrics
            if found.data.data_points
        }


@pytest.fixture
def reported():
    """Providers of this test's own, and what they received."""
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    yield Reported(exporter, reader, tracer_provider, meter_provider)
    tracer_provider.shutdown()
    meter_provider.shutdown()


@pytest.fixture(params=["memory", "sqlite"])
def backend(request, open_backend):
    """An empty backend: in memory, and a SQLite file."""
    return open_backend(request.param, HashingEmbedder(dim=64))


def every_text(span: ReadableSpan) -> str:
    """Everything a span says, as one string: its name, attributes and events."""
    parts = [span.name, json.dumps(dict(span.attributes or {}), default=str)]
    parts += [json.dumps(dict(event.attributes or {}), default=str) for event in span.events]
    return "\n".join(parts)
