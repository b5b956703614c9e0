"""Context assembly: page items from all tiers into a token budget, and explain the choice."""
