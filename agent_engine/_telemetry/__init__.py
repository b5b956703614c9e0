"""OpenTelemetry spans and metrics of memory operations and context builds (``docs/telemetry.md``).

Optional: with the ``otel`` extra (``opentelemetry-api``) stores report their operations,
and builds their phases and budget, to the application's OpenTelemetry providers; without it,
or with ``telemetry=None``, every operation runs as it would untraced. agent_engine uses the
API only and never configures an SDK or an exporter: whether anything is recorded, and where
it goes, is the application's choice. Nothing is sent anywhere by default.

The public names (:class:`Telemetry`, :data:`DEFAULT_TELEMETRY`) are re-exported by the
top-level package; :func:`operation` and :mod:`.names` are what stores and the assembler
report with.
"""

from agent_engine._telemetry import names
from agent_engine._telemetry.config import (
    DEFAULT_TELEMETRY,
    NO_OPERATION,
    AttributeValue,
    Telemetry,
    operation,
)

__all__ = [
    "DEFAULT_TELEMETRY",
    "NO_OPERATION",
    "AttributeValue",
    "Telemetry",
    "names",
    "operation",
]
