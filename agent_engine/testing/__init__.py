"""Test support shipped with the package: the backend conformance suite and fakes.

Importing :mod:`agent_engine.testing.conformance` needs pytest and hypothesis (the ``test``
extra); nothing else in agent_engine imports this package.
"""
