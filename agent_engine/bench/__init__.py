"""The benchmark suite: paging-policy quality on LoCoMo, cost at scale, currentness, aging.

Shipped inside the package so ``agent-engine bench`` works from an installed wheel; the data
is never shipped (LoCoMo is CC BY-NC 4.0): point the suite at your copy of ``locomo10.json``.
"""
