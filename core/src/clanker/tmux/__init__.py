"""tmux: open a launch in a window of a clanker tmux session, and jump to a pane.

:mod:`clanker.tmux.control` speaks to the tmux server, :mod:`clanker.tmux.handoff`
hands a launch to a new window (the window runs :mod:`clanker.tmux.window`, the
ordinary foreground launch).
"""
