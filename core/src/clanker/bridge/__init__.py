"""The agent bridge: one capability plane an agent calls on purpose.

:mod:`~clanker.bridge.declaration` and :mod:`~clanker.bridge.input` declare a
host capability once (its JSON Schema and its parser), :mod:`~clanker.bridge.shipped`
holds the ones clanker ships, :mod:`~clanker.bridge.credentials` and
:mod:`~clanker.bridge.service` are the authority the grid runs,
:mod:`~clanker.bridge.wire` the ops' one schema and :mod:`~clanker.bridge.cmd`
the lean ``clanker cmd`` client. :mod:`~clanker.bridge.capability` is the
provider contract for handing a harness the MCP endpoint (not used yet).

This ``__init__`` imports nothing: ``clanker cmd`` must start lean.
"""
