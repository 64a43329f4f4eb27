"""Agent attention: which launched agent is working, waiting for a person, or done.

Native hook, plugin and extension events become canonical lifecycle events
(:mod:`~clanker.attention.envelope`) through a provider-owned interpreter; the
grid's one :class:`~clanker.attention.broker.Broker` applies the lifecycle
invariants and publishes revisioned snapshots.

This package's ``__init__`` imports nothing: the hook bridge
(:mod:`~clanker.attention.hook`) runs with the standard library alone.
"""
