"""Tool sources for the tool loop: the ``ToolSet`` protocol and the registry of a turn's sources.

A :class:`ToolSet` gives OpenAI-format tool definitions and executes calls. The built-in tools
(:mod:`switchboard.agent.builtin_tools`) are one ToolSet; MCP tools plug in as another
(:class:`switchboard.tools.mcp_client.McpToolSource`). Every call gets the turn's
:class:`~switchboard.tools.context.ToolContext`, built by the orchestrator from the authenticated turn
request; a failure the model should see is a :class:`~switchboard.errors.ToolError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from switchboard.errors import ToolError
from switchboard.tools.context import ToolContext, ToolOutput, TurnEffect, idempotency_key_for

__all__ = [
    "ToolContext",
    "ToolOutput",
    "ToolSet",
    "ToolError",
    "TurnEffect",
    "ToolRegistry",
    "idempotency_key_for",
]


@runtime_checkable
class ToolSet(Protocol):
    """A source of tools (built-ins, an MCP server...)."""

    async def definitions(self, ctx: ToolContext) -> list[dict[str, Any]]:
        """OpenAI-format tool definitions this tenant may use
        (``[{"type": "function", "function": {"name", "description", "parameters"}}]``), without any
        ``tenant_id`` / ``tool_config`` parameter."""
        ...

    async def call(self, name: str, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        """Run tool ``name``.

        Raises:
            ToolError: a failure the model should see (bad arguments, not found, forbidden...).
        """
        ...


class ToolRegistry:
    """Several ToolSets seen as one: names map to the set that defines them (first wins)."""

    def __init__(self, toolsets: Sequence[ToolSet]) -> None:
        self.toolsets = list(toolsets)

    async def definitions(self, ctx: ToolContext) -> tuple[list[dict[str, Any]], dict[str, ToolSet]]:
        """All definitions and the owner of each name."""
        definitions: list[dict[str, Any]] = []
        owners: dict[str, ToolSet] = {}
        for toolset in self.toolsets:
            for definition in await toolset.definitions(ctx):
                name = definition["function"]["name"]
                if name in owners:
                    continue
                owners[name] = toolset
                definitions.append(definition)
        return definitions, owners

    def claimant(self, name: str) -> ToolSet | None:
        """A set that knows tool ``name`` although it did not offer it this turn (an MCP tool the tenant
        has not enabled): it answers such a call itself, with a generic ``Forbidden`` and a security
        alert, instead of the loop's "unknown tool". Sets opt in with a ``knows(name) -> bool`` method."""
        for toolset in self.toolsets:
            knows = getattr(toolset, "knows", None)
            if knows is not None and knows(name):
                return toolset
        return None
