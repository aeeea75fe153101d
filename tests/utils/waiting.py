"""Waiting on observable state instead of sleeping a fixed time."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

POLL_S = 0.02
"""Time between two checks, seconds."""


async def eventually(
    check: Callable[[], Any | Awaitable[Any]], *, cap_s: float = 60.0, what: str = ""
) -> Any:
    """Poll ``check`` (sync or async) until it returns something truthy, and return that.

    ``cap_s`` is a cap on a broken system (generous: a busy 2-core machine is slow), not a measurement.

    Raises:
        AssertionError: ``check`` never held within ``cap_s`` seconds.
    """
    deadline = asyncio.get_running_loop().time() + cap_s
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"never happened within {cap_s} s: {what or check}")
        await asyncio.sleep(POLL_S)
