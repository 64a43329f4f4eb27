"""Guidance: the launch-scoped instruction telling an agent what it may ask (contract only)."""
