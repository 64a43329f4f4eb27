"""Isolated checkouts: git worktrees as transactions (contract only so far)."""
