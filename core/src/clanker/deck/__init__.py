"""``clanker deck``: one live terminal dashboard of every agent, on the library API alone.

:mod:`~clanker.deck.rows` is the pure part (snapshot, seen watermark, time and
size in; rows and lines out), :mod:`~clanker.deck.seen` the deck's only state of
its own, :mod:`~clanker.deck.feed` the grid subscription, :mod:`~clanker.deck.app`
the prompt_toolkit application (the only module that imports prompt_toolkit).
"""
