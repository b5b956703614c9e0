"""Test support shipped with the package: the backend conformance suite and fakes.

:class:`BackendConformance` is the suite every backend passes unchanged; :class:`BackendFuzz`
feeds adversarial input to a backend and the stores and assembler on it. Both need pytest
and hypothesis (the ``test`` extra), so they load on first use: importing this package needs
neither. Nothing else in agent_engine imports this package.
"""

import typing as _typing

from agent_engine import _lazy

if _typing.TYPE_CHECKING:
    from agent_engine.testing.conformance import BackendConformance
    from agent_engine.testing.fuzz import BackendFuzz
else:
    __getattr__, __dir__ = _lazy.on_first_use(
        globals(),
        {
            "BackendConformance": "agent_engine.testing.conformance",
            "BackendFuzz": "agent_engine.testing.fuzz",
        },
    )

__all__ = [
    "BackendConformance",
    "BackendFuzz",
]
