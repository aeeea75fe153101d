"""What every tool call knows about its turn, and the one idempotency key of a call.

:class:`ToolContext` is built by the orchestrator from the authenticated turn request (the tenant that
owns the channel account the message arrived on) and handed to every tool source: the built-in tools,
the MCP tool source, any other :class:`~switchboard.agent.tools.ToolSet`. The model never chooses the
tenant, conversation, customer, trace id or idempotency key. (On the MCP server, a handler gets a
:class:`~switchboard.tools.contracts.ToolCallContext` rebuilt from the injected parameters.)
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import async_sessionmaker
    from sqlmodel.ext.asyncio.session import AsyncSession

__all__ = [
    "ToolContext",
    "ToolKind",
    "ToolOutput",
    "TurnEffect",
    "UNTRUSTED_REFUSAL",
    "canonical_arguments",
    "idempotency_key_for",
    "offered",
]

TurnEffect = Literal["escalated", "closed_farewell", "closed_silent"]
ToolKind = Literal["read", "write", "handoff"]
"""What a tool does: looks something up, changes something, or hands the conversation on (to a
person, or closes it): the last kind stays available whatever the context holds."""
UNTRUSTED_REFUSAL = "changes are not allowed while untrusted external text is in the conversation"


def canonical_arguments(arguments: Mapping[str, Any]) -> str:
    """Arguments as canonical JSON (sorted keys, no spaces): equal arguments, equal text."""
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=False)


def idempotency_key_for(trace_id: str, tool_name: str, arguments: Mapping[str, Any]) -> str:
    """The idempotency key of one tool call: SHA-256 hex (64 characters) of the trace id, the tool
    name and the canonical arguments.

    The trace id is derived from the inbound message (``trace_id_for``), so the same message asking
    for the same write always yields the same key, whatever call id the model gives it: a retried
    turn executes the write once.
    """
    text = f"{trace_id}\n{tool_name}\n{canonical_arguments(arguments)}"
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, kw_only=True)
class ToolContext:
    """Who is asking, for one tool call (or for the tool list of a turn). Never set by the model."""

    tenant_id: uuid.UUID
    """The tenant that owns the conversation (from the authenticated turn request)."""
    conversation_id: uuid.UUID
    customer_id: uuid.UUID
    trace_id: str
    """Derived from the inbound message (``trace_id_for``): a re-processed message has the same one."""
    sessions: async_sessionmaker[AsyncSession]
    """Database sessions; a tool opens its own short transaction."""
    call_id: str = ""
    """The model's tool-call id (unique within the turn); empty for the turn's tool list."""
    idempotency_key: str | None = None
    """:func:`idempotency_key_for` of this call (``None`` for the tool list)."""
    channel: str = "whatsapp"
    has_untrusted_content: bool = False
    """Untrusted external text (an e-mail body, an outside system's tool result) is in the context:
    only read tools are offered and run."""
    tool_config: dict[str, Any] = field(default_factory=dict)
    """This tenant's ``custom_config`` for the tool (MCP tools)."""


def offered(ctx: ToolContext, kind: str) -> bool:
    """The one tool filter of the untrusted-content rule, used by every tool source (built-ins, MCP):
    while untrusted external text is in the turn's context (``ctx.has_untrusted_content``, set by the
    orchestrator from the channel's :attr:`~switchboard.channels.base.Capabilities.untrusted_inbound`),
    only ``read`` and ``handoff`` tools are offered, and only they run."""
    return not (ctx.has_untrusted_content and kind == "write")


@dataclass
class ToolOutput:
    """What a tool returns: ``content`` for the model, and an optional effect on the turn."""

    content: Any
    """A string or JSON-able value shown to the model (serialized, capped and truncated by the loop)."""
    effect: TurnEffect | None = None
    """``escalated``: the conversation waits for a human; ``closed_farewell``: closed, say goodbye;
    ``closed_silent``: closed, the turn ends without a reply."""
    parts: tuple[Any, ...] = ()
    """Structured reply parts (:data:`switchboard.replies.StructuredPart`: buttons, a list, a product
    card) the tool adds to the turn's reply (``offer_options``, ``show_product``)."""
