"""``python -m clanker.cli``."""

from clanker.cli import main

main()
