"""The package's front door: ``__all__`` is sorted and lists exactly the public names."""

from __future__ import annotations

import importlib.metadata

import agent_engine


class TestPublicApi:
    def test_all_is_sorted(self):
        """__all__ is kept sorted so diffs show additions plainly."""
        assert agent_engine.__all__ == sorted(agent_engine.__all__)

    def test_all_matches_public_attributes(self):
        """Every public attribute is exported, and every export exists.

        ``dir()``, not ``vars()``: the names that load on first use are not in the module's
        namespace until then, and ``getattr`` loads each one, so a lazy name that does not
        resolve fails here.
        """
        public = {
            name
            for name in dir(agent_engine)
            if not name.startswith("_")
            and not isinstance(getattr(agent_engine, name), type(agent_engine))
        }
        assert public | {"__version__"} == set(agent_engine.__all__)

    def test_version(self):
        """__version__ is exported: the installed distribution's version string."""
        assert "__version__" in agent_engine.__all__
        assert agent_engine.__version__ == importlib.metadata.version("agent-engine")

    def test_version_of_an_uninstalled_checkout(self, tmp_path):
        """Without metadata the version comes from pyproject.toml, else it is 0+unknown."""
        from agent_engine._version import UNKNOWN, _checkout_version  # noqa: PLC0415

        pyproject = tmp_path / "pyproject.toml"
        assert _checkout_version(pyproject) == UNKNOWN
        pyproject.write_text('[project]\nname = "agent-engine"\nversion = "1.2.3"\n')
        assert _checkout_version(pyproject) == "1.2.3"
        pyproject.write_text("[project\n")
        assert _checkout_version(pyproject) == UNKNOWN
