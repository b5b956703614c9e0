"""The error tree: every public error crosses a process boundary as itself."""

from __future__ import annotations

import inspect
import multiprocessing
import pickle

import pytest

from agent_engine import errors


def _error_classes() -> list[type[errors.AgentEngineError]]:
    return [getattr(errors, name) for name in errors.__all__]


def _example(cls: type[errors.AgentEngineError]) -> errors.AgentEngineError:
    """An instance of ``cls`` with every parameter of its constructor given a distinct value."""
    if cls.__init__ is Exception.__init__:
        return cls("message-value")
    parameters = inspect.signature(cls).parameters.values()
    positional = [f"{p.name}-value" for p in parameters if p.kind is p.POSITIONAL_OR_KEYWORD]
    keywords = {p.name: f"{p.name}-value" for p in parameters if p.kind is p.KEYWORD_ONLY}
    return cls(*positional, **keywords)


# Run by the worker through the builtin exec: a function of this module could not be
# imported there, where the tests are not a package on the path.
_RAISE_TIMEOUT = (
    "from agent_engine.errors import QueryTimeoutError\n"
    "raise QueryTimeoutError('ran past the limit', timeout=30.0, backend='SQLAlchemyBackend')"
)


class TestPickling:
    @pytest.mark.parametrize("cls", _error_classes(), ids=lambda cls: cls.__name__)
    def test_round_trip_keeps_type_message_and_details(self, cls):
        error = _example(cls)
        copy = pickle.loads(pickle.dumps(error))  # noqa: S301 - our own bytes
        assert type(copy) is cls
        assert str(copy) == str(error)
        assert copy.args == error.args
        assert vars(copy) == vars(error)

    def test_an_error_raised_in_a_worker_process_reaches_the_caller(self):
        """A pool hands the worker's error back; before, unpickling it killed the pool."""
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            result = pool.apply_async(exec, (_RAISE_TIMEOUT,))
            with pytest.raises(errors.QueryTimeoutError, match="ran past") as raised:
                result.get(timeout=60)
        assert raised.value.timeout == 30.0
        assert raised.value.backend == "SQLAlchemyBackend"
