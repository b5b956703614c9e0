"""``python -m agent_engine.cli``: the same as the ``agent-engine`` console script."""

from agent_engine.cli import main

raise SystemExit(main())
