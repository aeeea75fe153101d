"""Tool sources for the tool loop: the ``ToolSet`` protocol, the per-call context, errors.

A :class:`ToolSet` gives OpenAI-format tool definitions and executes calls. The built-in tools
(:mod:`switchboard.agent.builtin_tools`) are one ToolSet; MCP tools plug in as another. The
:class:`ToolContext` is built by the orchestrator from the authenticated turn request: the model
never chooses the tenant, conversation, customer, trace id or idempotency key.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.errors import SwitchboardError

__all__ = [
    "ToolContext",
    "ToolOutput",
    "ToolSet",
    "ToolError",
    "TurnEffect",
    "ToolRegistry",
    "idempotency_key_for",
]

TurnEffect = Literal["escalated", "closed_farewell", "closed_silent"]


class ToolError(SwitchboardError):
    """A tool failed; the message (never a stack trace) goes back to the model as the result.

    Attributes:
        error_type: short class for the model and the records (``invalid_arguments``, ``not_found``...).
        retryable: whether trying again later may succeed (timeouts, 5xx) or not (validation, forbidden).
    """

    def __init__(self, message: str, *, error_type: str = "tool_error", retryable: bool = False) -> None:
        self.error_type = error_type
        self.retryable = retryable
        super().__init__(message)


def idempotency_key_for(trace_id: str, call_id: str) -> str:
    """Stable key of one tool call: SHA-256 of ``trace_id:call_id`` (64 hex chars).

    The same inbound message re-processed yields the same trace id; the model's call id makes it
    unique within the turn.
    """
    return hashlib.sha256(f"{trace_id}:{call_id}".encode()).hexdigest()


@dataclass(frozen=True, kw_only=True)
class ToolContext:
    """Who is asking, for one tool call. Set by the orchestrator, never by the model."""

    tenant_id: uuid.UUID
    """The tenant that owns the conversation (from the authenticated turn request)."""
    conversation_id: uuid.UUID
    customer_id: uuid.UUID
    trace_id: str
    call_id: str
    """The model's tool-call id (unique within the turn)."""
    idempotency_key: str
    """``idempotency_key_for(trace_id, call_id)``: writes use it so a replayed turn changes nothing twice."""
    sessions: async_sessionmaker[AsyncSession]
    """Database sessions; a tool opens its own short transaction."""
    channel: str = "whatsapp"
    tool_config: dict[str, Any] = field(default_factory=dict)
    """This tenant's ``custom_config`` for the tool (MCP tools)."""


@dataclass
class ToolOutput:
    """What a tool returns: ``content`` for the model, and an optional effect on the turn."""

    content: Any
    """A string or JSON-able value shown to the model (serialized, capped and truncated by the loop)."""
    effect: TurnEffect | None = None
    """``escalated``: the conversation waits for a human; ``closed_farewell``: closed, say goodbye;
    ``closed_silent``: closed, the turn ends without a reply."""


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
