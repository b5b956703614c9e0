"""The three memory tiers over any backend, promotion between them, and their audit log."""
