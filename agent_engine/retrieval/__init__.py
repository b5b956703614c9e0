"""Ranking components: lexical analysis, BM25 over sessions, and score fusion."""
