"""The package's front door: ``__all__`` is sorted and lists exactly the public names."""

from __future__ import annotations

import agent_engine


class TestPublicApi:
    def test_all_is_sorted(self):
        """__all__ is kept sorted so diffs show additions plainly."""
        assert agent_engine.__all__ == sorted(agent_engine.__all__)

    def test_all_matches_public_attributes(self):
        """Every public attribute is exported, and every export exists."""
        public = {
            name
            for name in vars(agent_engine)
            if not name.startswith("_")
            and not isinstance(getattr(agent_engine, name), type(agent_engine))
        }
        assert public == set(agent_engine.__all__)
