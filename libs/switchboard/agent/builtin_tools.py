"""The orchestrator's built-in tools: ``end_conversation``, ``escalate_to_human``, ``save_customer_profile``,
and the structured-reply tools ``offer_options`` and ``show_product``.

``offer_options`` / ``show_product`` change nothing: their validated arguments become structured parts of
the turn's reply (:class:`~switchboard.tools.context.ToolOutput` ``parts`` →
:attr:`~switchboard.contracts.TurnResult.parts`), rendered by each channel within its limits. Invalid
arguments go back to the model as ``invalid_arguments`` with the validation messages.

Each changes rows of the conversation's tenant only (through :class:`~switchboard.db.tenant_scope.TenantScope`
with the tenant from the :class:`~switchboard.agent.tools.ToolContext`), in its own short transaction,
with an ``audit_logs`` row (actor ``model``, the trace id). ``escalate_to_human`` hands the conversation
to :func:`switchboard.handoff.escalate_and_notify` (least-loaded online agent, or the waiting queue).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from switchboard.agent.tools import ToolContext, ToolError, ToolOutput
from switchboard.conversations import Actor, InvalidTransition, close
from switchboard.db.engine import session_scope
from switchboard.db.models import AuditLog, Conversation, Customer, Tenant, utcnow
from switchboard.db.tenant_scope import TenantScope
from switchboard.handoff.hours import waiting_reply
from switchboard.memory.notes import NotesRejected, check_customer_text, check_notes
from switchboard.observability import get_logger
from switchboard.replies.parts import OptionList, ProductCard, QuickReplies
from switchboard.tenant_settings import tenant_settings_from
from switchboard.tools.context import UNTRUSTED_REFUSAL, offered
from switchboard.validation import normalize_email, normalize_phone_e164

__all__ = ["BuiltinToolSet", "CustomerProfileUpdate", "BUILTIN_TOOL_NAMES", "BUILTIN_KINDS"]

log = get_logger(__name__)

_LANGUAGE_RE = re.compile(r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*$")


class CustomerProfileUpdate(BaseModel):
    """Fields ``save_customer_profile`` accepts; anything else is rejected back to the model.

    The profile goes into later system prompts (``<customer_profile>``), so its text is checked like the
    memory (:mod:`switchboard.memory.notes`): no tags, look-alike letters or instructions in any field,
    and a commitment in ``notes`` only as the customer's claim (``The customer says ...``), since the
    customer's own words are all this tool hears. The stored text is the normalized one.
    """

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    name: str | None = Field(None, min_length=1, max_length=200)
    email: str | None = Field(None, max_length=320)
    phone: str | None = Field(None, max_length=32)
    language: str | None = Field(None, max_length=35)
    """BCP 47 tag such as ``en``, ``pt-BR``."""
    company: str | None = Field(None, min_length=1, max_length=200)
    notes: str | None = Field(None, min_length=1, max_length=2_000)

    @field_validator("name", "company")
    @classmethod
    def _plain_text(cls, value: str | None) -> str | None:
        return _checked(value, lambda v: check_customer_text(v, max_chars=200))

    @field_validator("notes")
    @classmethod
    def _notes(cls, value: str | None) -> str | None:
        return _checked(value, lambda v: check_notes(v, max_chars=2_000))

    @field_validator("email")
    @classmethod
    def _email(cls, value: str | None) -> str | None:
        return normalize_email(value) if value is not None else None

    @field_validator("phone")
    @classmethod
    def _phone(cls, value: str | None) -> str | None:
        return normalize_phone_e164(value) if value is not None else None

    @field_validator("language")
    @classmethod
    def _language(cls, value: str | None) -> str | None:
        if value is not None and not _LANGUAGE_RE.match(value):
            raise ValueError("use a language tag such as 'en' or 'pt-BR'")
        return value


def _checked(value: str | None, check: Any) -> str | None:
    if value is None:
        return None
    try:
        return str(check(value))
    except NotesRejected as exc:
        hint = (
            "write what the customer said as 'The customer says ...'"
            if exc.reason == "unsupported_commitment"
            else "save only plain facts about the customer, no tags or instructions"
        )
        raise ValueError(f"{exc} ({hint})") from None


def _function(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


BUILTIN_KINDS: dict[str, str] = {
    "end_conversation": "handoff",
    "escalate_to_human": "handoff",
    "save_customer_profile": "write",  # would store what an untrusted mail dictates
    "offer_options": "read",  # shapes the reply only; changes nothing
    "show_product": "read",
}
"""The :data:`~switchboard.tools.context.ToolKind` of each built-in (the untrusted-content filter reads it)."""

_DEFINITIONS: list[dict[str, Any]] = [
    _function(
        "end_conversation",
        "Close this conversation when the customer's matter is finished or they say goodbye. "
        "With farewell=true you then write one short goodbye; with farewell=false nothing more is sent.",
        {
            "farewell": {
                "type": "boolean",
                "description": "Send a short goodbye after closing.",
                "default": True,
            },
            "reason": {"type": "string", "description": "Why the conversation ends, for the records."},
        },
        [],
    ),
    _function(
        "escalate_to_human",
        "Hand the conversation to a person from the team: when the customer asks for a person, is upset, "
        "or needs something you cannot do. Afterwards tell the customer a person will take over.",
        {"reason": {"type": "string", "description": "What the person needs to know, in one sentence."}},
        ["reason"],
    ),
    _function(
        "save_customer_profile",
        "Save details the customer told you about themselves (only what they said). "
        "Fields: name, email, phone, language (tag like 'en'), company, notes.",
        {
            "name": {"type": "string", "description": "The customer's name."},
            "email": {"type": "string", "description": "E-mail address."},
            "phone": {"type": "string", "description": "Phone number, digits with optional leading +."},
            "language": {
                "type": "string",
                "description": "Preferred language tag, e.g. 'en', 'es', 'pt-BR'.",
            },
            "company": {"type": "string", "description": "Company the customer represents."},
            "notes": {"type": "string", "description": "Other lasting facts worth remembering."},
        },
        [],
    ),
]

_OPTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "description": "Stable id the tap returns."},
        "title": {"type": "string", "description": "Short label."},
        "description": {"type": "string"},
        "url": {"type": "string", "description": "https link."},
    },
    "required": ["id", "title"],
    "additionalProperties": False,
}
_DEFINITIONS += [
    _function(
        "offer_options",
        "Show choices the customer taps under your reply ('buttons': 2-3 short ones; 'list': a menu). "
        "A tap returns as their next message with '[chose option id: ...]'. Don't repeat them in your text.",
        {
            "style": {"type": "string", "enum": ["buttons", "list"]},
            "prompt": {"type": "string", "description": "The question."},
            "options": {"type": "array", "items": _OPTION_SCHEMA},
            "button_label": {"type": "string", "description": "List button label."},
        },
        ["style", "prompt", "options"],
    ),
    _function(
        "show_product",
        "Show one product card under your reply, with one button: a link (cta_url) or a tap (cta_id). "
        "Only facts you have.",
        {
            "title": {"type": "string"},
            "description": {"type": "string"},
            "image_url": {"type": "string"},
            "price": {"type": "string", "description": "e.g. '129.90'"},
            "currency": {"type": "string", "description": "ISO 4217"},
            "cta_title": {"type": "string"},
            "cta_url": {"type": "string"},
            "cta_id": {"type": "string"},
        },
        ["title", "cta_title"],
    ),
]

BUILTIN_TOOL_NAMES = frozenset(d["function"]["name"] for d in _DEFINITIONS)


class BuiltinToolSet:
    """The built-in tools as a :class:`~switchboard.agent.tools.ToolSet`.

    Args:
        gateway: model gateway for the handoff summary sent to the agent (``None``: no summary call).
        redis: the ARQ pool the agent's notice is queued on (``handoff_notice``, so the customer's reply
            never waits for the summary); ``None``: the notice is written during the tool call.
    """

    def __init__(self, gateway: Any = None, redis: Any = None) -> None:
        self.gateway = gateway
        self.redis = redis

    async def definitions(self, ctx: ToolContext) -> list[dict[str, Any]]:
        """The built-ins :func:`~switchboard.tools.context.offered` lets this turn see."""
        return [dict(d) for d in _DEFINITIONS if offered(ctx, BUILTIN_KINDS[d["function"]["name"]])]

    async def call(self, name: str, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        """Run one built-in.

        Raises:
            ToolError: ``invalid_arguments`` (validation), ``not_found`` (the conversation or customer
                is not this tenant's), ``unknown_tool``.
        """
        if name in BUILTIN_KINDS and not offered(ctx, BUILTIN_KINDS[name]):
            raise ToolError(UNTRUSTED_REFUSAL, error_type="untrusted_context")
        if name == "end_conversation":
            return await self._end_conversation(ctx, arguments)
        if name == "escalate_to_human":
            return await self._escalate(ctx, arguments)
        if name == "save_customer_profile":
            return await self._save_profile(ctx, arguments)
        if name == "offer_options":
            return _structured(ctx, name, lambda: _options_part(arguments))
        if name == "show_product":
            return _structured(ctx, name, lambda: _product_part(arguments))
        raise ToolError(f"unknown tool {name!r}", error_type="unknown_tool")

    async def _conversation(self, scope: TenantScope, ctx: ToolContext) -> Conversation:
        conversation = await scope.get(Conversation, ctx.conversation_id)
        if conversation is None:
            raise ToolError("conversation not found", error_type="not_found")
        return conversation

    async def _end_conversation(self, ctx: ToolContext, arguments: dict[str, Any]) -> ToolOutput:
        farewell = arguments.get("farewell", True)
        reason = arguments.get("reason")
        if not isinstance(farewell, bool) or (reason is not None and not isinstance(reason, str)):
            raise ToolError("farewell must be a boolean and reason a string", error_type="invalid_arguments")
        async with session_scope(ctx.sessions) as session:
            scope = TenantScope(session, ctx.tenant_id)
            conversation = await self._conversation(scope, ctx)
            try:
                await close(
                    session, conversation, actor=Actor.ai(), reason=reason or None, trace_id=ctx.trace_id
                )
            except InvalidTransition:
                raise ToolError(
                    "a person from the team handles this conversation now; it stays open",
                    error_type="conflict",
                ) from None
            scope.add(
                _audit(ctx, "conversation.close", {"reason": (reason or "")[:500], "farewell": farewell})
            )
        log.info(
            "conversation_closed",
            trace_id=ctx.trace_id,
            conversation_id=str(ctx.conversation_id),
            farewell=farewell,
        )
        if farewell:
            return ToolOutput(
                {
                    "status": "closed",
                    "farewell": True,
                    "next": "Write one short goodbye to the customer now.",
                },
                effect="closed_farewell",
            )
        return ToolOutput(
            {"status": "closed", "farewell": False, "next": "Nothing more is sent."}, effect="closed_silent"
        )

    async def _escalate(self, ctx: ToolContext, arguments: dict[str, Any]) -> ToolOutput:
        reason = arguments.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            raise ToolError(
                "reason is required: one sentence for the person taking over", error_type="invalid_arguments"
            )
        from switchboard.handoff import escalate_and_notify

        try:
            assignment = await escalate_and_notify(
                ctx.sessions,
                self.gateway,
                tenant_id=ctx.tenant_id,
                conversation_id=ctx.conversation_id,
                reason=reason.strip(),
                trace_id=ctx.trace_id,
                actor=Actor.ai(),
                redis=self.redis,
            )
        except LookupError:
            raise ToolError("conversation not found", error_type="not_found") from None
        except InvalidTransition:
            raise ToolError("this conversation is closed", error_type="conflict") from None
        async with session_scope(ctx.sessions) as session:
            TenantScope(session, ctx.tenant_id).add(
                _audit(
                    ctx,
                    "conversation.escalate",
                    {"reason": reason.strip()[:500], "queued": assignment.agent is None},
                )
            )
        log.info("conversation_escalated", trace_id=ctx.trace_id, conversation_id=str(ctx.conversation_id))
        if assignment.agent is None:
            async with ctx.sessions() as session:
                tenant = await session.get(Tenant, ctx.tenant_id)
            queue_reply = waiting_reply(
                tenant_settings_from(
                    tenant.settings_extensions if tenant else None, tenant_id=str(ctx.tenant_id)
                ),
                assignment.opens_at,
            )
            away = assignment.opens_at is not None
            return ToolOutput(
                {
                    "status": "queued_for_human",
                    "queue_position": assignment.queue_position,
                    "next": (
                        "The team is away (outside business hours); the conversation waits for the next "
                        "opening."
                        if away
                        else "Nobody from the team is online right now; the "
                        "conversation waits for the next person."
                    )
                    + f" Tell the customer, in their language: {queue_reply}",
                },
                effect="escalated",
            )
        return ToolOutput(
            {
                "status": "waiting_for_human",
                "next": "Tell the customer briefly that a person from the team will take over here.",
            },
            effect="escalated",
        )

    async def _save_profile(self, ctx: ToolContext, arguments: dict[str, Any]) -> ToolOutput:
        try:
            update = CustomerProfileUpdate.model_validate(arguments)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()
            )
            log.warning(
                "customer_profile_rejected",
                tenant_id=str(ctx.tenant_id),
                customer_id=str(ctx.customer_id),
                conversation_id=str(ctx.conversation_id),
                trace_id=ctx.trace_id,
                problems=problems[:500],
            )
            raise ToolError(f"invalid profile fields: {problems}", error_type="invalid_arguments") from None
        fields = update.model_dump(exclude_none=True)
        if not fields:
            raise ToolError("no fields given", error_type="invalid_arguments")
        async with session_scope(ctx.sessions) as session:
            scope = TenantScope(session, ctx.tenant_id)
            customer = await scope.get(Customer, ctx.customer_id)
            if customer is None:
                raise ToolError("customer not found", error_type="not_found")
            customer.profile = {**(customer.profile or {}), **fields}
            customer.updated_at = utcnow()
            scope.add(_audit(ctx, "customer.profile_saved", {"fields": sorted(fields)}, target="customer"))
        return ToolOutput({"saved": sorted(fields)})


def _options_part(arguments: dict[str, Any]) -> QuickReplies | OptionList:
    fields = {k: v for k, v in arguments.items() if k != "style"}
    if arguments.get("style") == "list":
        return OptionList.model_validate(fields)
    if arguments.get("style") not in (None, "buttons"):
        raise ToolError("style must be 'buttons' or 'list'", error_type="invalid_arguments")
    return QuickReplies.model_validate({k: v for k, v in fields.items() if k != "button_label"})


def _product_part(arguments: dict[str, Any]) -> ProductCard:
    fields = dict(arguments)
    cta = {
        "title": fields.pop("cta_title", None),
        "url": fields.pop("cta_url", None),
        "id": fields.pop("cta_id", None),
    }
    return ProductCard.model_validate({**fields, "cta": {k: v for k, v in cta.items() if v is not None}})


def _structured(ctx: ToolContext, name: str, build: Any) -> ToolOutput:
    """Validate a structured part; the model sees what was accepted, or every validation problem."""
    try:
        part = build()
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()
        )
        log.info("structured_part_rejected", tool_name=name, trace_id=ctx.trace_id, problems=problems[:500])
        raise ToolError(f"invalid {name} arguments: {problems}", error_type="invalid_arguments") from None
    log.info("structured_part_added", tool_name=name, trace_id=ctx.trace_id, kind=part.kind)
    return ToolOutput(
        {
            "status": "shown_with_your_reply",
            "kind": part.kind,
            "next": "Write your reply text now; the customer sees these after it. Do not repeat them.",
        },
        parts=(part,),
    )


def _audit(ctx: ToolContext, action: str, details: dict[str, Any], target: str = "conversation") -> AuditLog:
    target_id = ctx.conversation_id if target == "conversation" else ctx.customer_id
    return AuditLog(
        tenant_id=ctx.tenant_id,
        actor="model",
        action=action,
        target_type=target,
        target_id=str(target_id),
        details={**details, "idempotency_key": ctx.idempotency_key},
        trace_id=ctx.trace_id,
    )
