"""The benchmark suite: recall, cost, currentness, aging, forks, dedup, write path, processes.

Paging-policy quality on LoCoMo, cost at scale, changed facts, compaction, forks against deep
copies, conflict detection, the near-duplicate check, and many executor processes sharing one
store.

Shipped inside the package so ``agent-engine bench`` works from an installed wheel; the data
is never shipped (LoCoMo is CC BY-NC 4.0): point the suite at your copy of ``locomo10.json``.
"""
