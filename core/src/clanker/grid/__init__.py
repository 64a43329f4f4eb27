"""The grid: the per-user daemon that owns live state.

One process per user listens on a private Unix socket (a 0700 directory under
the runtime directory, guarded by an exclusive lock beside it) and owns the
terminal table, the attention :class:`~clanker.attention.broker.Broker` and the
terminals' credentials. :mod:`~clanker.grid.protocol` is the versioned
JSON-lines protocol it speaks, :mod:`~clanker.grid.server` the :class:`Grid`
itself (a library user can run one in-process), :mod:`~clanker.grid.daemon`
the single-instance daemon around it and :mod:`~clanker.grid.client` a small
synchronous client.

This ``__init__`` imports nothing, so the modules stay independently cheap.
"""
