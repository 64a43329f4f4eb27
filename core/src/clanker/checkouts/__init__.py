"""Isolated checkouts: git worktrees created and completed as transactions.

:mod:`clanker.checkouts.service` is the shared service (create, list,
complete, prune); :mod:`clanker.checkouts.types` its results and its error.
:mod:`clanker.checkouts.capability` holds the re-homing contract, which no
service calls yet.
"""
