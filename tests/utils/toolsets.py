"""A ToolSet for loop tests: a plug-in tool source like the MCP one (not a mock of our code)."""

from __future__ import annotations

import asyncio
from typing import Any

from switchboard.agent.tools import ToolContext, ToolError, ToolOutput


def _fn(name: str, description: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    }


class ScratchToolSet:
    """``lookup`` echoes its arguments, ``slow`` sleeps ``sleep_s``, ``big`` returns ``big_chars``
    characters, ``boom`` raises RuntimeError, ``refuse`` raises ToolError; contexts are recorded, and
    calls cancelled before they finished are counted (``cancelled``)."""

    def __init__(self, *, sleep_s: float = 5.0, big_chars: int = 200_000) -> None:
        self.sleep_s = sleep_s
        self.big_chars = big_chars
        self.contexts: list[ToolContext] = []
        self.active = 0
        self.max_active = 0
        self.cancelled = 0

    async def definitions(self, ctx: ToolContext) -> list[dict[str, Any]]:
        return [
            _fn("lookup", "Echo"),
            _fn("slow", "Sleep"),
            _fn("big", "Big"),
            _fn("boom", "Crash"),
            _fn("refuse", "Refuse"),
        ]

    async def call(self, name: str, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        self.contexts.append(ctx)
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            if name == "lookup":
                await asyncio.sleep(0.05)
                return ToolOutput({"echo": arguments})
            if name == "slow":
                await asyncio.sleep(self.sleep_s)
                return ToolOutput("slept")
            if name == "big":
                return ToolOutput("x" * self.big_chars)
            if name == "boom":
                raise RuntimeError("bug in a tool")
            if name == "refuse":
                raise ToolError("order not found", error_type="not_found")
            raise ToolError(f"unknown {name}", error_type="unknown_tool")
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.active -= 1
