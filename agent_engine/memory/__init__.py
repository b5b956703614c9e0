"""Storage: the backend protocol and its implementations."""
