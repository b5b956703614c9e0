"""OpenTelemetry is optional: without it nothing changes, and nothing is loaded before it is used.

Each check runs in a fresh interpreter: which modules are loaded, and the global providers,
belong to the process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

_WORK = textwrap.dedent(
    """
    import json, sys
    from agent_engine import (
        ContextAssembler, ContextRequest, HashingEmbedder, InMemoryBackend, MemoryStores,
        Task, Telemetry, promote,
    )

    def work(**telemetry):
        stores = MemoryStores(
            InMemoryBackend(embedder=HashingEmbedder(dim=32)),
            confirm=lambda _request: True,
            **telemetry,
        )
        assembler = ContextAssembler(stores)
        task = Task(id="t", project_id="p", description="fix the login bug")
        memory = assembler.task_store(task)
        step = memory.add_reasoning("the login token expires a minute early", "s1")
        memory.search_text("login token", k=2)
        project = assembler.project_store("p")
        promote(memory, project, step.id)
        project.compact()
        package = assembler.build_context(task, ContextRequest(budget_tokens=200, query="login"))
        return [selection.item.text for selection in package.selections]
    """
)


def _run(code: str) -> dict:
    """Run ``code`` after the work above in a fresh interpreter; its last line, as JSON."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(  # noqa: S603 - our own interpreter and script
        [sys.executable, "-c", _WORK + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


EXPECTED = ["the login token expires a minute early"]


class TestWithoutOpenTelemetry:
    @pytest.mark.parametrize(
        "blocked",
        [
            pytest.param(["opentelemetry"], id="not-installed"),
            pytest.param(["opentelemetry.metrics"], id="api-incomplete"),
        ],
    )
    def test_everything_works_without_it(self, blocked):
        """With the API not importable, stores and builds run as ever, whatever the telemetry.

        ``api-incomplete``: the tracing API loads but the metrics API does not, so the first
        operation's attempt to load ours fails, and it goes on without.
        """
        block = "".join(f"sys.modules[{name!r}] = None\n" for name in blocked)
        found = _run(
            f"""
            {block}
            if "opentelemetry" not in sys.modules:
                try:
                    import opentelemetry.trace  # a library that uses tracing, if it can
                except ImportError:
                    pass
            texts = [work(telemetry=None), work(), work(telemetry=Telemetry(record_text=True))]
            try:
                import opentelemetry.metrics  # noqa: F401
                importable = True
            except ImportError:
                importable = False
            print(json.dumps({{"texts": texts, "metrics_importable": importable}}))
            """
        )
        assert found["texts"] == [EXPECTED] * 3
        assert found["metrics_importable"] is False

    def test_never_loaded_by_an_application_that_does_not_use_it(self):
        """The default telemetry does not import OpenTelemetry for a process that never did."""
        found = _run(
            """
            texts = work()
            loaded = sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry")
            print(json.dumps({"texts": texts, "loaded": loaded}))
            """
        )
        assert found == {"texts": EXPECTED, "loaded": []}


class TestGlobalProviders:
    def test_the_default_reports_to_the_global_providers_and_none_reports_nothing(self):
        """By default the application's SDK receives everything; telemetry=None sends it nothing.

        The SDK is configured after agent_engine is imported, as applications often do.
        """
        found = _run(
            """
            from opentelemetry import metrics, trace
            from opentelemetry.sdk.metrics import MeterProvider
            from opentelemetry.sdk.metrics.export import InMemoryMetricReader
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import SimpleSpanProcessor
            from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
                InMemorySpanExporter,
            )

            before = work()  # before the SDK: nowhere to report yet
            exporter = InMemorySpanExporter()
            tracer_provider = TracerProvider()
            tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
            trace.set_tracer_provider(tracer_provider)
            reader = InMemoryMetricReader()
            metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))

            def measured():
                data = reader.get_metrics_data()
                return sum(
                    getattr(point, "count", None) or getattr(point, "value", 0)
                    for resource in (data.resource_metrics if data else [])
                    for scope in resource.scope_metrics
                    for metric in scope.metrics
                    for point in metric.data.data_points
                )

            off = work(telemetry=None)
            spans_off, measured_off = len(exporter.get_finished_spans()), measured()
            on = work()
            names = sorted({span.name for span in exporter.get_finished_spans()})
            print(json.dumps({
                "texts": [before, off, on],
                "spans_off": spans_off,
                "measured_off": measured_off,
                "names": names,
                "measured_on": measured(),
            }))
            """
        )
        assert found["texts"] == [EXPECTED] * 3
        assert found["spans_off"] == 0
        assert found["measured_off"] == 0
        assert found["names"] == [
            "build_context",
            "search_memory",
            "update_memory",
            "upsert_memory",
        ]
        assert found["measured_on"] > 0
