"""How a quota's reset reads, the same wherever usage is shown (`clanker usage`,
the deck's usage panel)."""

from __future__ import annotations

from datetime import datetime

__all__ = ["format_duration", "reset_text"]


def format_duration(seconds: float) -> str:
    """``42m``, ``1h 42m``, ``3d 6h``."""
    minutes = max(0, int(seconds // 60))
    days, minutes = divmod(minutes, 1440)
    hours, minutes = divmod(minutes, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m"


def reset_text(moment: datetime | None, now: datetime) -> str:
    """``resets in 1h 42m``, ``reset due``, ``resets Dec 09`` past a week, or ``""``."""
    if moment is None:
        return ""
    seconds = (moment - now).total_seconds()
    if seconds <= 0:
        return "reset due"
    if seconds > 7 * 86400:
        return "resets " + moment.astimezone().strftime("%b %d")
    return "resets in " + format_duration(seconds)
