"""Tool contracts (docs/tools.md): what each tool accepts, returns and may do.

A :class:`ToolContract` pairs a pydantic input model (the arguments the model chooses), a typed
result model, a :class:`ToolPolicy` (read or write, per-turn call limit, whether a person must
approve) and the handler. The MCP server publishes the policy in each tool's ``_meta`` under
:data:`CONTRACT_META_KEY`, so the orchestrator learns it at discovery time.

Parameters named in :data:`INJECTED_PARAMS` are never the model's: the orchestrator strips them
from the schema it shows the model and fills them from the authenticated turn.

Handlers raise :class:`~switchboard.errors.ToolError`. Errors cross the MCP wire as text;
:func:`error_text` prefixes the error type in brackets (``"[forbidden] Forbidden"``) and
:func:`parse_error_text` reads it back on the client.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import AuditLog
from switchboard.settings import Settings
from switchboard.validation import has_unstorable_chars

__all__ = [
    "CONTRACT_META_KEY",
    "INJECTED_PARAMS",
    "FORBIDDEN_MESSAGE",
    "ToolPolicy",
    "ToolContract",
    "ToolCallContext",
    "WriteResult",
    "error_text",
    "parse_error_text",
    "UNSTORABLE_PROBLEM",
    "unstorable_field",
]

CONTRACT_META_KEY = "switchboard/contract"
"""Key of the contract (version, policy) in an MCP tool's ``_meta``."""

INJECTED_PARAMS: tuple[str, ...] = (
    "tenant_id",
    "customer_id",
    "conversation_id",
    "trace_id",
    "idempotency_key",
    "tool_config",
    "capability",
)
"""Tool parameters the orchestrator fills from the authenticated turn; never shown to or taken from a model.

``tool_config`` stays in the list so that a model (or a caller) sending it is stripped and ignored:
the tool server uses only the tenant's stored configuration. ``capability`` is the signed per-turn
capability (:mod:`switchboard.tools.capability`)."""

FORBIDDEN_MESSAGE = "Forbidden"
"""The only thing a model learns about a denied call (details go to ``security_alerts``)."""

ErrorType = str
# the SDK prefixes "Error executing tool <name>: " to the message of its ToolError
_ERROR_RE = re.compile(r"^(?:Error executing tool [\w.-]+: )?\[([a-z_]{1,40})\] (.*)$", re.DOTALL)


UNSTORABLE_PROBLEM = "contains a NUL or another character the database cannot store"
"""What an argument holding text Postgres cannot store (NUL, an unpaired surrogate) is told."""


def unstorable_field(value: Any, path: str = "") -> str | None:
    """The path (``query``, ``items.2.name``) of the first string in ``value`` (arguments as JSON
    gives them: dicts, lists, strings, numbers; keys too) that Postgres cannot store, else ``None``.

    Such text never reaches a query: the call is an ``invalid_arguments`` error naming the field,
    not the database failure it would cause."""
    if isinstance(value, str):
        return (path or "(arguments)") if has_unstorable_chars(value) else None
    if isinstance(value, Mapping):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if isinstance(key, str) and has_unstorable_chars(key):
                return path or "(arguments)"
            found = unstorable_field(item, where)
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = unstorable_field(item, f"{path}.{index}" if path else str(index))
            if found is not None:
                return found
    return None


def error_text(error_type: ErrorType, message: str) -> str:
    """``"[error_type] message"``: how the server reports a failure over MCP."""
    return f"[{error_type}] {message}"


def parse_error_text(text: str) -> tuple[ErrorType, str]:
    """Inverse of :func:`error_text`; unbracketed text (SDK errors) is ``("tool_error", text)``."""
    match = _ERROR_RE.match(text.strip())
    if match:
        return match.group(1), match.group(2)
    return "tool_error", text.strip()


class ToolPolicy(BaseModel):
    """What a tool may do (published in ``_meta``; enforced by the orchestrator and the server)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["read", "write"]
    """``write`` tools change state: idempotency key required, audit row, per-turn mutation budget."""
    call_limit: int = Field(3, ge=1)
    """Calls of this tool per turn."""
    needs_approval: bool = False
    """A person must approve: the call creates a ``pending_actions`` row instead of executing.
    A tenant may turn it on per tool with ``custom_config = {"needs_approval": true}``."""


class WriteResult(BaseModel):
    """Common fields of every write tool's result."""

    status: Literal["done", "pending_approval"]
    """``pending_approval``: a person must approve; nothing changed yet."""
    message: str
    pending_action_id: str | None = None
    replayed: bool = False
    """True when the same idempotency key had already run: the stored outcome is returned, nothing ran twice."""


@dataclass(frozen=True, kw_only=True)
class ToolCallContext:
    """Who is asking, for one call on the server. Built from injected parameters, never model ones."""

    tenant_id: uuid.UUID
    """The tenant of the conversation (injected by the orchestrator)."""
    customer_id: uuid.UUID | None
    """The customer of the conversation; tools about "my order" refuse to run without it."""
    conversation_id: uuid.UUID | None
    trace_id: str | None
    idempotency_key: str | None
    """Required for writes: derived from the inbound message and the tool arguments."""
    tool_config: Mapping[str, Any]
    """This tenant's ``custom_config`` for the tool."""
    session: AsyncSession
    """Open session inside the call's single transaction (mutation and audit row commit together)."""
    settings: Settings | None = None
    """Process settings of the tool server (knowledge search thresholds, embedding provider)."""

    def audit(
        self,
        action: str,
        *,
        target_type: str,
        target_id: str,
        before: Any = None,
        after: Any = None,
    ) -> AuditLog:
        """Stage an ``audit_logs`` row (actor ``model``) in the call's transaction."""
        row = AuditLog(
            tenant_id=self.tenant_id,
            actor="model",
            action=action,
            target_type=target_type,
            target_id=target_id,
            details={
                "before": before,
                "after": after,
                "conversation_id": str(self.conversation_id) if self.conversation_id else None,
                "idempotency_key": self.idempotency_key,
            },
            trace_id=self.trace_id,
        )
        self.session.add(row)
        return row


Handler = Callable[[ToolCallContext, Any], Awaitable[BaseModel]]


@dataclass(frozen=True, kw_only=True)
class ToolContract:
    """One tool: name, version, the model-facing description, shapes, policy and handler.

    Attributes:
        description: what the model reads to decide when to call the tool.
        input_model: the arguments the model chooses (no injected parameters).
        result_model: the typed result; a result of another shape never reaches the model.
        handler: ``async (ctx, args) -> result_model``; raises :class:`~switchboard.errors.ToolError`.
    """

    name: str
    version: str
    description: str
    input_model: type[BaseModel]
    result_model: type[BaseModel]
    policy: ToolPolicy
    handler: Handler

    def meta(self) -> dict[str, Any]:
        """The ``_meta`` entry published with the tool."""
        return {
            CONTRACT_META_KEY: {
                "version": self.version,
                **self.policy.model_dump(),
                "injected": list(INJECTED_PARAMS),
            }
        }
