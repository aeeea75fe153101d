"""The bounded tool loop (docs/architecture.md#the-tool-loop).

Limits (per tenant, :class:`~switchboard.tenant_settings.LoopLimits`): at most ``max_tool_iterations``
model calls that return tool calls; ``turn_timeout_s`` for the whole turn; ``tool_timeout_s`` per tool
call; tool output capped at ``max_raw_tool_result_chars`` before any processing and truncated to
``max_tool_result_chars`` before the model sees it; ``per_tool_call_cap`` calls per tool (a tool at
its cap disappears from the list, except ``always_on_tools``) and ``max_tool_calls_per_turn`` in all.
When the loop ends without text, one final call with ``tools=[]`` forces words.

Unknown tools, malformed JSON arguments, tool errors, timeouts and calls over a cap go back to the
model as tool results ``{"error": {"type", "message", "retryable"}}``; they never crash the turn.
All tool calls of one response run concurrently and each gets its result.

Every path ends in exactly one of a non-empty reply or silence: when the model gives no words, the
tenant's ``handoff_reply`` / ``farewell_reply`` / ``error_reply`` is used; ``end_conversation`` with
``farewell=false`` makes the turn silent.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from switchboard.agent.tools import ToolContext, ToolError, ToolOutput, ToolRegistry, ToolSet, TurnEffect
from switchboard.contracts import TokenUsage, ToolCallRecord
from switchboard.errors import tool_error_result
from switchboard.llm.budget import TurnBudget
from switchboard.llm.router import ContextOverflow, ModelCallFailed, ModelGateway, ModelReply, TenantRouter
from switchboard.llm.trimming import (
    count_tokens,
    shrink_to_budget,
    split_units,
    strip_reasoning,
    trim_to_budget,
)
from switchboard.observability import get_logger, metrics, tracing
from switchboard.replies.parts import MAX_REPLY_PARTS  # a tool call that would add more gets an error result
from switchboard.replies.typed import parse_typed_reply
from switchboard.tenant_settings import LoopLimits, TenantSettings

__all__ = ["LoopOutcome", "run_tool_loop", "truncate_result", "visible_tools"]

log = get_logger(__name__)

Outcome = Literal["answered", "silent", "degraded", "blocked"]
"""``blocked``: the input guardrail or an exceeded budget stopped the turn before the loop ran."""

OVERFLOW_RETRIES = 2
"""Shrunk re-sends after a context overflow in one model call (each budget smaller than the last)."""
UNSTATED_LIMIT_SHRINK = 0.5
"""Without a limit in the provider's error, the next budget is this share of what was sent."""


@dataclass
class LoopOutcome:
    """What one run of the loop produced."""

    reply: str | None
    silent: bool
    outcome: Outcome
    error: str | None = None
    """Why the turn was degraded (``turn_timeout``, ``model_failed: ...``)."""
    model_unavailable: bool = False
    """Every deployment failed (errors, timeouts, refused connections: not a prompt too long) and no
    model answered in this turn: the question waits for the provider (the worker parks it)."""
    model_id: str | None = None
    fallback_used: bool = False
    effect: TurnEffect | None = None
    tool_records: list[ToolCallRecord] = field(default_factory=list)
    tool_receipts: list[dict[str, Any]] = field(default_factory=list)
    """Per call: name, call id, arguments hash input, outcome, error type, duration."""
    new_messages: list[dict[str, Any]] = field(default_factory=list)
    """Assistant tool-call and tool-result messages of this turn (the final reply is not included)."""
    usage: TokenUsage = field(default_factory=TokenUsage)
    model_calls: int = 0
    tool_iterations: int = 0
    forced_final_call: bool = False
    overflow_retried: bool = False
    model_ms: float = 0.0
    tool_ms: float = 0.0
    models_used: list[str] = field(default_factory=list)
    cost_usd: float = 0.0
    """Spend of the loop's model calls in USD (each :attr:`ModelReply.cost_usd`)."""
    unpriced_calls: int = 0
    """Model calls whose deployment LiteLLM's cost map does not price (counted as 0 USD)."""
    offered_tools: list[str] = field(default_factory=list)
    """Names of the tools the turn could offer (the output guardrail looks for them in the reply)."""
    parts: list[Any] = field(default_factory=list)
    """Structured reply parts the turn's tools produced (``ToolOutput.parts``), in call order, then those of a
    typed reply (:mod:`switchboard.replies.typed`)."""


def truncate_result(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, ending with ``…[truncated N characters]``."""
    if len(text) <= limit:
        return text
    marker = f"\n…[truncated {len(text) - limit} characters]"
    keep = max(0, limit - len(marker))
    return text[:keep] + f"\n…[truncated {len(text) - keep} characters]"


def _serialize(content: Any, raw_cap: int) -> str:
    if isinstance(content, str):
        return content[:raw_cap]
    if isinstance(content, bytes):
        return content[:raw_cap].decode("utf-8", errors="replace")
    try:
        return json.dumps(content, ensure_ascii=False, default=str)[:raw_cap]
    except (TypeError, ValueError):
        return str(content)[:raw_cap]


def visible_tools(
    definitions: list[dict[str, Any]], counts: Counter[str], limits: LoopLimits, total_calls: int
) -> list[dict[str, Any]]:
    """Tools the model may see now: none once the turn-wide cap is reached; a tool at its per-tool cap
    is hidden unless it is in ``always_on_tools``."""
    if total_calls >= limits.max_tool_calls_per_turn:
        return []
    always = set(limits.always_on_tools)
    return [
        d
        for d in definitions
        if d["function"]["name"] in always or counts[d["function"]["name"]] < limits.per_tool_call_cap
    ]


def _error_result(error_type: str, message: str, retryable: bool = False) -> str:
    return json.dumps(tool_error_result(error_type, message, retryable=retryable))


MakeContext = Callable[..., ToolContext]
"""``make_ctx(call_id, tool_name=None, arguments=None)``: the context of one call (or, with only a
call id, of the turn's tool list); see ``Orchestrator._context_factory``."""


@dataclass
class _Loop:
    gateway: ModelGateway
    tenant_router: TenantRouter
    settings: TenantSettings
    messages: list[dict[str, Any]]
    registry: ToolRegistry
    make_ctx: MakeContext
    trace_id: str
    out: LoopOutcome = field(
        default_factory=lambda: LoopOutcome(reply=None, silent=False, outcome="answered")
    )
    deadline: float | None = None
    """``time.monotonic()`` when the turn budget ends (model calls keep time for fallbacks)."""
    claimed: set[str] = field(default_factory=set)
    """Tools not offered this turn but claimed by their source, which refuses them (see ``ToolRegistry.claimant``)."""

    @property
    def limits(self) -> LoopLimits:
        return self.settings.loop

    def tool_timeout_s(self) -> float:
        """One tool call's timeout: ``tool_timeout_s``, or what is left of the turn when that is less."""
        if self.deadline is None:
            return self.limits.tool_timeout_s
        return max(0.0, min(self.limits.tool_timeout_s, self.deadline - time.monotonic()))

    async def call_model(self, tools: list[dict[str, Any]]) -> ModelReply:
        """Trim, call, and on a context overflow shrink the prompt for real and call again."""
        llm = self.settings.llm
        budget = int(self.tenant_router.context_window_tokens * llm.trim_ratio)
        _, units = split_units(self.messages)
        last_user = max(
            (i for i, u in enumerate(units) if u[0].get("role") == "user"), default=len(units) - 1
        )
        trimmed = trim_to_budget(
            self.messages,
            model=self.tenant_router.count_model,
            budget_tokens=budget,
            tools=tools or None,
            keep_last_units=max(1, len(units) - last_user),
        )
        try:
            reply = await self.gateway.complete(
                self.tenant_router,
                trimmed,
                tools=tools or None,
                llm=llm,
                trace_id=self.trace_id,
                deadline=self.deadline,
            )
        except ContextOverflow as overflow:
            reply = await self.recover_overflow(trimmed, tools, overflow)
        self.out.model_calls += 1
        self.out.model_ms += reply.duration_ms
        self.out.usage.prompt_tokens += reply.prompt_tokens
        self.out.usage.completion_tokens += reply.completion_tokens
        self.out.usage.total_tokens += reply.prompt_tokens + reply.completion_tokens
        self.out.cost_usd += reply.cost_usd  # priced once, by the gateway (llm.costs.call_cost)
        self.out.unpriced_calls += 0 if reply.priced else 1
        self.out.model_id = reply.model_id or self.out.model_id
        if reply.model_id:
            self.out.models_used.append(reply.model_id)
        self.out.fallback_used |= reply.fallback_used
        return reply

    async def recover_overflow(
        self, sent: list[dict[str, Any]], tools: list[dict[str, Any]], overflow: ContextOverflow
    ) -> ModelReply:
        """Re-send a prompt that really shrinks (docs/architecture.md#the-model-layer).

        The next budget is ``trim_ratio`` of the limit the provider stated (or, unstated, half of what
        was sent), and always below what was sent; :func:`~switchboard.llm.trimming.shrink_to_budget`
        drops older turns, then shortens the current tool results, keeping the system prompt and the
        latest customer message. At most :data:`OVERFLOW_RETRIES` re-sends.

        Raises:
            ContextOverflow: still too long after the last re-send, or nothing left to drop (the
                system prompt and the latest customer message alone overflow).
        """
        llm = self.settings.llm
        model = self.tenant_router.count_model
        for attempt in range(1, OVERFLOW_RETRIES + 1):
            sent_tokens = count_tokens(model, sent, tools or None)
            if overflow.limit_tokens:
                budget = int(overflow.limit_tokens * llm.trim_ratio)
            else:
                budget = int(sent_tokens * UNSTATED_LIMIT_SHRINK)
            budget = min(budget, int(sent_tokens * 0.9))  # never the identical prompt again
            shrunk = shrink_to_budget(sent, model=model, budget_tokens=budget, tools=tools or None)
            if count_tokens(model, shrunk, tools or None) >= sent_tokens:
                # only the system prompt and the latest message are left: re-sending them changes nothing
                log.warning("context_overflow_cannot_shrink", trace_id=self.trace_id, sent_tokens=sent_tokens)
                raise overflow
            self.out.overflow_retried = True
            self.out.model_calls += 1
            log.warning(
                "context_overflow_shrunk",
                trace_id=self.trace_id,
                attempt=attempt,
                stated_limit_tokens=overflow.limit_tokens,
                sent_tokens=sent_tokens,
                budget_tokens=budget,
                shrunk_tokens=count_tokens(model, shrunk, tools or None),
            )
            try:
                return await self.gateway.complete(
                    self.tenant_router,
                    shrunk,
                    tools=tools or None,
                    llm=llm,
                    trace_id=self.trace_id,
                    deadline=self.deadline,
                )
            except ContextOverflow as again:
                overflow, sent = again, shrunk
        raise overflow

    async def run(self) -> None:
        ctx0 = self.make_ctx("definitions")
        definitions, owners = await self.registry.definitions(ctx0)
        self.out.offered_tools = [d["function"]["name"] for d in definitions]
        counts: Counter[str] = Counter()
        total_calls = 0
        final_call = False
        while True:
            tools = [] if final_call else visible_tools(definitions, counts, self.limits, total_calls)
            if not tools and not final_call:
                final_call = True
            if final_call and definitions:
                self.out.forced_final_call = True
            reply = await self.call_model(tools)
            if reply.tool_calls and not final_call:
                self.out.tool_iterations += 1
                assistant = reply.assistant_message()
                assistant["content"] = strip_reasoning(assistant.get("content")) or None
                self.messages.append(assistant)
                self.out.new_messages.append(assistant)
                total_calls = await self.execute(reply.tool_calls, owners, tools, counts, total_calls)
                if self.out.effect == "closed_silent":
                    self.out.silent = True
                    self.out.outcome = "silent"
                    return
                if self.out.effect is not None:
                    final_call = True
                elif self.out.tool_iterations >= self.limits.max_tool_iterations:
                    final_call = True
                    log.info("tool_loop_limit", trace_id=self.trace_id, limit="max_tool_iterations")
                elif total_calls >= self.limits.max_tool_calls_per_turn:
                    final_call = True
                    log.info("tool_loop_limit", trace_id=self.trace_id, limit="max_tool_calls_per_turn")
                continue
            text = strip_reasoning(reply.content)
            if text and self.settings.agent.typed_replies:
                text = self.read_typed(text)
            if text:
                self.out.reply = text
                return
            if final_call:
                self.out.reply = self.fallback_text()
                log.warning("model_gave_no_words", trace_id=self.trace_id, used=self.out.reply[:40])
                return
            final_call = True  # empty answer without tool calls: one words-only call

    def read_typed(self, text: str) -> str:
        """The typed reply's text, its parts added to the turn's (:mod:`switchboard.replies.typed`);
        an object that does not validate sends its text alone, logged."""
        parsed = parse_typed_reply(text)
        if parsed.status == "invalid":
            log.warning("typed_reply_invalid", trace_id=self.trace_id, error=parsed.error)
        elif parsed.status == "typed":
            room = MAX_REPLY_PARTS - len(self.out.parts)
            if len(parsed.parts) > room:  # the tools filled some: never more than a reply holds
                log.warning(
                    "typed_reply_parts_over_limit",
                    trace_id=self.trace_id,
                    parts=len(parsed.parts),
                    kept=max(room, 0),
                    limit=MAX_REPLY_PARTS,
                )
            self.out.parts.extend(parsed.parts[: max(room, 0)])
            log.info("typed_reply", trace_id=self.trace_id, parts=[p.kind for p in parsed.parts])
        return parsed.text

    def fallback_text(self) -> str:
        agent = self.settings.agent
        if self.out.effect == "escalated":
            return agent.handoff_reply
        if self.out.effect == "closed_farewell":
            return agent.farewell_reply
        return agent.error_reply

    async def execute(
        self,
        calls: list[dict[str, Any]],
        owners: dict[str, ToolSet],
        offered: list[dict[str, Any]],
        counts: Counter[str],
        total_calls: int,
    ) -> int:
        """Dispatch every call of one response (caps decided in order, then run concurrently)."""
        offered_names = {d["function"]["name"] for d in offered}
        always = set(self.limits.always_on_tools)
        plans: list[tuple[dict[str, Any], str | None, str | None, dict[str, Any] | None]] = []
        for call in calls:
            name = call["function"]["name"]
            raw_args = call["function"].get("arguments") or "{}"
            rejection: tuple[str, str] | None = None
            args: dict[str, Any] | None = None
            if name not in owners and (claimant := self.registry.claimant(name)) is not None:
                owners[name] = claimant  # its source refuses the call (Forbidden + security alert)
                self.claimed.add(name)
            if name not in owners:
                rejection = ("unknown_tool", f"no tool named {name!r}; use one of the offered tools")
            elif total_calls >= self.limits.max_tool_calls_per_turn:
                rejection = (
                    "turn_call_limit",
                    "the turn's tool-call limit is reached; answer with what you have",
                )
            elif (name not in offered_names and name not in self.claimed) or (
                name not in always and counts[name] >= self.limits.per_tool_call_cap
            ):
                rejection = ("call_limit", f"{name} reached its call limit for this turn")
            else:
                try:
                    parsed = json.loads(raw_args) if raw_args.strip() else {}
                except json.JSONDecodeError as exc:
                    parsed = exc
                if not isinstance(parsed, dict):
                    rejection = ("invalid_arguments", "arguments must be a JSON object")
                else:
                    args = parsed
            if rejection is None or rejection[0] == "invalid_arguments":
                counts[name] += 1
                total_calls += 1
            plans.append((call, *(rejection or (None, None)), args))
        results = await asyncio.gather(*(self.run_one(plan, owners) for plan in plans))
        for message in results:
            self.messages.append(message)
            self.out.new_messages.append(message)
        return total_calls

    async def run_one(
        self,
        plan: tuple[dict[str, Any], str | None, str | None, dict[str, Any] | None],
        owners: dict[str, ToolSet],
    ) -> dict[str, Any]:
        call, error_type, error_message, args = plan
        name = call["function"]["name"]
        started = time.perf_counter()
        outcome = "ok"
        effect: TurnEffect | None = None
        idempotency_key: str | None = None
        with tracing.span(
            "tool.call", attributes={"tool.name": name, "tool.call_id": str(call.get("id", ""))}
        ) as current:
            if error_type is not None:
                outcome = "error" if error_type in ("unknown_tool", "invalid_arguments") else "rejected"
                content = _error_result(error_type, error_message or error_type)
            else:
                assert args is not None
                ctx = self.make_ctx(call["id"], name, args)
                idempotency_key = ctx.idempotency_key
                try:
                    output: ToolOutput = await asyncio.wait_for(
                        owners[name].call(name, args, ctx), self.tool_timeout_s()
                    )
                    raw = _serialize(output.content, self.limits.max_raw_tool_result_chars)
                    content = truncate_result(raw, self.limits.max_tool_result_chars)
                    effect = output.effect
                    if (
                        len(self.out.parts) + len(output.parts) > MAX_REPLY_PARTS
                    ):  # refused, never cut silently
                        outcome, error_type = "error", "too_many_parts"
                        content = _error_result(
                            "too_many_parts", f"a reply holds at most {MAX_REPLY_PARTS} structured parts"
                        )
                    else:
                        self.out.parts.extend(output.parts)
                except TimeoutError:
                    outcome, error_type = "timeout", "timeout"
                    content = _error_result(
                        "timeout", f"{name} took longer than {self.limits.tool_timeout_s:g} s", True
                    )
                except ToolError as exc:
                    outcome, error_type = "error", exc.error_type
                    content = json.dumps(exc.as_result())
                except (
                    Exception
                ) as exc:  # a tool's bug must not crash the turn; the model sees a generic error
                    outcome, error_type = "error", "tool_exception"
                    log.exception("tool_exception", trace_id=self.trace_id, tool_name=name)
                    content = _error_result("tool_exception", f"{name} failed: {type(exc).__name__}")
            current.set_attribute("tool.outcome", outcome)
            if error_type is not None:
                current.set_attribute("tool.error_type", error_type)
                tracing.set_error(current, error_type)
        duration_ms = (time.perf_counter() - started) * 1000
        # a made-up name is no label value; imported tools are named by tenants: a bounded set
        label = "unknown" if error_type == "unknown_tool" else metrics.TOOL_LABELS(name)
        metrics.TOOL_CALLS.labels(label, outcome).inc()
        metrics.TOOL_CALL_SECONDS.labels(label).observe(duration_ms / 1000)
        self.out.tool_ms += duration_ms
        if effect is not None and (self.out.effect is None or effect == "escalated"):
            self.out.effect = effect
        self.out.tool_records.append(
            ToolCallRecord(
                name=name, outcome=outcome, error_type=error_type, duration_ms=round(duration_ms, 3)
            )
        )
        self.out.tool_receipts.append(
            {
                "recorded_by_source": bool(getattr(owners.get(name), "records_receipts", False)),
                "name": name,
                "call_id": call["id"],
                "idempotency_key": idempotency_key,
                "arguments": call["function"].get("arguments") or "",
                "outcome": outcome,
                "error_type": error_type,
                "duration_ms": duration_ms,
            }
        )
        log.info(
            "tool_called",
            trace_id=self.trace_id,
            tool_name=name,
            outcome=outcome,
            error_type=error_type,
            duration_ms=round(duration_ms, 1),
        )
        return {"role": "tool", "tool_call_id": call["id"], "content": content}


async def run_tool_loop(
    *,
    gateway: ModelGateway,
    tenant_router: TenantRouter,
    settings: TenantSettings,
    messages: list[dict[str, Any]],
    registry: ToolRegistry,
    make_ctx: MakeContext,
    trace_id: str,
    budget: TurnBudget | None = None,
) -> LoopOutcome:
    """Run the loop over ``messages`` (system prompt, history, the new user message; extended in place).

    ``budget``: the turn's (shared with the guardrail and the summary); ``None``: ``turn_timeout_s`` from
    now. Every model call gets at most what is left, every tool call ``min(tool_timeout_s, left)``.

    Never raises for model or tool trouble: a turn timeout or every deployment failing gives
    ``outcome="degraded"`` with the tenant's fallback text (or silence after ``end_conversation``
    without farewell) and ``error`` set.
    """
    budget = budget or TurnBudget.starting_now(settings.loop.turn_timeout_s)
    loop = _Loop(
        gateway, tenant_router, settings, messages, registry, make_ctx, trace_id, deadline=budget.deadline
    )
    try:
        async with asyncio.timeout_at(_loop_time_at(budget)):
            await loop.run()
    except TimeoutError:
        loop.out.outcome, loop.out.error = "degraded", "turn_timeout"
        loop.out.model_unavailable = not loop.out.models_used  # no model answered at all
        log.error("turn_timeout", trace_id=trace_id, turn_timeout_s=settings.loop.turn_timeout_s)
    except ModelCallFailed as exc:
        loop.out.outcome, loop.out.error = "degraded", f"model_failed: {exc}"[:500]
        loop.out.model_unavailable = not isinstance(exc, ContextOverflow)
    out = loop.out
    if out.outcome == "degraded":
        if out.effect == "closed_silent":
            out.reply, out.silent = None, True
        else:
            out.reply, out.silent = loop.fallback_text(), False
    if out.silent:
        out.parts = []  # nothing is sent on a silent turn
    return out


def _loop_time_at(budget: TurnBudget) -> float:
    """The budget's deadline on the event loop's clock (``asyncio.timeout_at``)."""
    return asyncio.get_running_loop().time() + budget.left_s()
