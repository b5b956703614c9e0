"""``python -m agent_engine.bench``: run the benchmark suite."""

from agent_engine.bench.runner import main

raise SystemExit(main())
