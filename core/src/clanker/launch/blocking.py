"""Running a coroutine from the launch path's synchronous code."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["blocking"]

T = TypeVar("T")


def blocking(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to completion from synchronous code, even inside a running loop."""
    # Imported here: a launch service that is only built (``clanker coder``'s early
    # start reads its child environment) does not pay for asyncio.
    import asyncio
    import concurrent.futures

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
