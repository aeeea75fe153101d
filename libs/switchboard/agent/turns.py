"""One turn: ``TurnRequest`` in, ``TurnResult`` out, with history, idempotency and persistence.

Steps of :meth:`Orchestrator.handle_turn`:

1. **Claim** the inbound message in ``turns`` (unique ``inbound_message_id``). A finished turn is
   returned as stored, without calling a model; one in progress elsewhere is waited for; one left
   ``running`` longer than the turn budget (a crashed process) is taken over. The conversation must
   belong to the request's tenant and customer. If no ``messages`` row has the inbound id (tests,
   ``switchboard simulate``), one is inserted (inbound, role ``user``, the request's text). The tenant,
   the conversation, the inbound id's turn, the inbound row and the context below (last summary,
   customer profile and memory, "returning customer", the conversation's lead) are one statement
   (:func:`_claim_read`); a stored turn is answered by it alone.
2. **History** (:func:`switchboard.conversations.read_history`; read with the budget in the claim's
   transaction: one session before the model calls): the conversation's
   ``user``/``assistant``/``tool``/``human_agent`` messages after the last stored summary, oldest first,
   except the inbound row, then ``{"role": "user", "content": request.text}`` (the
   processed text: a transcription, an image description...). When more than
   ``summarize_after_messages`` (70) messages follow the last summary, this turn reads them verbatim
   (trimming bounds the prompt) and, after it is written, the older ones (all but the newest
   ``keep_verbatim_messages``, 50) are folded into one summary by the background job
   ``summarize_history`` (:mod:`switchboard.agent.history_summary`), which the next turn reads.
3. **Budget** (:mod:`switchboard.budgets`): past the tenant's monthly budget the turn either runs on
   the cheapest deployment group only (``cheaper_group``) or calls no model, sends the holding reply
   and hands the conversation to a person (``handoff``); past ``warn_ratio`` it is flagged and logged.
4. **Input guardrail** (:func:`switchboard.guardrails.input.check_input`, unless the tenant turned it
   off): a score below the threshold stops the turn (outcome ``blocked``): the customer gets the
   polite redirect, or the conversation goes to a person.
5. **Loop**: :func:`switchboard.agent.loop.run_tool_loop` through the tenant's Router.
6. **Output guardrail** (:func:`switchboard.guardrails.output.check_output`): a reply leaking the
   system prompt or tool internals, or showing contact data the turn never saw, is replaced by the
   safe reply and flagged ``output_replaced``.
7. **Persist** in one transaction: the turn's assistant/tool messages and the reply (with the trace
   id), a ``tool_receipts`` row per call, and the ``turns`` row (result, model, fallback, usage, timings,
   ``guardrails`` records, ``cost_usd``). The lead check (:mod:`switchboard.leads`) of an answered turn
   runs in the same transaction in a SAVEPOINT when it is the offline heuristic (its failure rolls back
   only itself); a check by a model is the background job ``check_lead_intent``
   (:mod:`switchboard.leads.jobs`), queued after the commit, so it never delays the reply. The heuristic
   first reads the rows the turn holds: a conversation with a lead at the claim, or no intent in them,
   costs no statement.

Every model and tool call of the turn draws from one :class:`~switchboard.llm.budget.TurnBudget`
(``loop.turn_timeout_s`` from the claim): a call's timeout is its own or what is left, whichever is less.

A conversation that is not in AI mode (``human`` or ``closed``) gets ``silent`` without a model call.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from sqlalchemy import and_, delete, exists, update
from sqlalchemy import select as sa_select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import col
from sqlmodel.ext.asyncio.session import AsyncSession
from tenacity import AsyncRetrying, stop_after_attempt, wait_exponential_jitter

from switchboard.agent.builtin_tools import BuiltinToolSet
from switchboard.agent.history_summary import summarize_history
from switchboard.agent.loop import LoopOutcome, run_tool_loop
from switchboard.agent.prompt import build_system_prompt, fence_inbound
from switchboard.agent.tools import ToolContext, ToolRegistry, ToolSet, idempotency_key_for
from switchboard.budgets.settings import BudgetSettings
from switchboard.budgets.spend import BudgetState, budget_state
from switchboard.channels.base import channel_capabilities
from switchboard.contracts import TokenUsage, TurnRequest, TurnResult, trace_id_for
from switchboard.conversations import (
    MODEL_ROLES,
    Actor,
    InvalidTransition,
    append_model_messages,
    model_messages,
    read_history,
)
from switchboard.crypto import CredentialDecryptError
from switchboard.db.engine import session_scope
from switchboard.db.models import (
    Conversation,
    ConversationStatus,
    Customer,
    InboundState,
    Lead,
    Message,
    MessageDirection,
    MessageRole,
    Tenant,
    ToolReceipt,
    Turn,
    TurnStatus,
    UserMemory,
    utcnow,
)
from switchboard.db.tenant_scope import TenantScope
from switchboard.errors import SwitchboardError
from switchboard.events import has_subscriber, stage_event
from switchboard.guardrails.input import check_input
from switchboard.guardrails.output import check_output
from switchboard.guardrails.records import GuardrailRecord
from switchboard.guardrails.settings import GuardrailSettings
from switchboard.leads import capture_lead_in, heuristic_may_find_intent, lead_recorded
from switchboard.leads.jobs import capture_lead_by_model
from switchboard.llm.budget import TurnBudget
from switchboard.llm.config import default_deployments
from switchboard.llm.costs import cheapest_group, group_router_key, only_group
from switchboard.llm.health import MODEL_UNAVAILABLE, record_turn
from switchboard.llm.router import ModelGateway, TenantRouter
from switchboard.memory.store import closed_within, last_closed_at
from switchboard.observability import get_logger, message_context, metrics, tracing
from switchboard.storable import clean_text, clean_tree
from switchboard.tenant_settings import TenantSettings, cached_tenant_settings

__all__ = ["Orchestrator", "TurnRejected"]

log = get_logger(__name__)

EMPTY_MESSAGE_TEXT = "[the customer sent a message without text]"
"""Shown to the model for an empty ``text`` (providers reject empty user messages)."""
WAIT_POLL_S = 0.1
"""How often a repeated request polls a turn that another process is running."""
STALE_MARGIN_S = 5.0
"""A ``running`` turn older than the turn budget plus this is considered abandoned and taken over. The
budget is enforced by the loop and persisting takes milliseconds, so 5 s is plenty; it must keep budget
plus margin (125 s by default) under the worker's ``ORCHESTRATOR_TIMEOUT_S`` (130 s), or a retry after
a killed orchestrator waits out its own timeout. A turn that fails in-process is released at once."""


class TurnRejected(SwitchboardError):
    """The request cannot be served as sent (the caller's fault): unknown conversation, wrong customer.

    Attributes:
        status_code: HTTP status for the API (404 or 422).
    """

    def __init__(self, status_code: int, message: str) -> None:
        self.status_code = status_code
        super().__init__(message)


@dataclass
class _Context:
    """What the turn reads before its first model call, read in the claim's transaction (one session
    and one round trip less per turn than a session of its own)."""

    budget: BudgetState
    summary_text: str | None
    """The conversation's last stored summary (``turns.summary_text``), if any."""
    rows: list[Message]
    """History after the last summary, oldest first, without the inbound row."""
    profile: dict[str, Any] | None
    """The customer's profile (``None``: no such customer of the tenant)."""
    memory: str | None
    """The customer's memory summary (``None``: none, or empty)."""
    returning: bool
    has_lead: bool
    """The conversation had a lead when the turn was claimed (the lead check then has nothing to do)."""


@dataclass
class _Claim:
    stored: TurnResult | None = None
    turn_id: uuid.UUID | None = None
    skip_reason: str | None = None
    context: _Context | None = None
    """Read with a new claim of a conversation in AI mode."""
    conversation: Conversation | None = None
    """The conversation as the claim read it (its ids and channel: what persisting needs, not re-read)."""
    inbound: Message | None = None
    """The inbound row as stored (read or inserted by a new claim): the lead check reads it."""


RELEASE_ATTEMPTS = 5
"""Tries to drop a failed turn's claim (about 10 s in all, jittered backoff 0.5-4 s)."""


@dataclass
class _Guarded:
    """What the guardrails and the budget added to a turn."""

    records: dict[str, GuardrailRecord] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    cost_usd: float = 0.0
    """Spend of the guardrail calls (USD)."""


@dataclass
class Orchestrator:
    """Answers turns. One per process (built at start-up), shared by every request.

    Args:
        sessions: database session factory.
        gateway: the model gateway (Routers per tenant, semaphore).
        toolsets: tool sources besides the built-ins (MCP tools plug in here).
    """

    sessions: async_sessionmaker[AsyncSession]
    gateway: ModelGateway
    toolsets: Sequence[ToolSet] = field(default_factory=tuple)
    redis: Any = None
    """Queues the checks that are not the answer (the model's lead-intent check) as background jobs
    (an ``ArqRedis``); ``None`` (an embedding process without a queue): they run after the turn is
    written, before it returns."""

    def __post_init__(self) -> None:
        self.registry = ToolRegistry([BuiltinToolSet(gateway=self.gateway, redis=self.redis), *self.toolsets])

    async def handle_turn(self, request: TurnRequest) -> TurnResult:
        """Answer ``request`` (see the module docstring).

        Raises:
            TurnRejected: the conversation is not the tenant's (404) or not the customer's (422).
        """
        trace_id = trace_id_for(request.conversation_id, request.inbound_message_id)
        attributes = {
            "tenant.id": str(request.tenant_id),
            "conversation.id": str(request.conversation_id),
            "inbound_message.id": str(request.inbound_message_id),
            "channel": request.channel,
        }
        with (
            message_context(
                tenant_id=str(request.tenant_id),
                conversation_id=str(request.conversation_id),
                trace_id=trace_id,
            ),
            tracing.within_message_trace(trace_id),  # a caller without traceparent still lands in the trace
            tracing.span("agent.turn", attributes=attributes),
        ):
            return await self._handle(request, trace_id)

    async def _handle(self, request: TurnRequest, trace_id: str) -> TurnResult:
        started = time.perf_counter()
        claim, tenant_settings = await self._claim(request, trace_id)
        while claim.stored is None and claim.turn_id is None:
            await asyncio.sleep(WAIT_POLL_S)
            claim, tenant_settings = await self._claim(request, trace_id)
        if claim.stored is not None:
            log.info("turn_replayed", outcome="stored")
            _count_turn("replayed")
            return claim.stored
        assert claim.turn_id is not None
        # one budget for every model and tool call of the turn (llm.budget), from the claim on
        time_budget = TurnBudget.starting_now(tenant_settings.loop.turn_timeout_s)
        if claim.skip_reason is not None:
            result = TurnResult(silent=True, trace_id=trace_id)
            await self._finish_skipped(claim.turn_id, request, result, claim.skip_reason)
            log.info("turn_skipped", reason=claim.skip_reason)
            _count_turn("skipped")
            return result

        try:
            try:
                tenant_router = self.gateway.router_for(request.tenant_id, tenant_settings.llm)
            except CredentialDecryptError:
                # logged by the gateway with the deployment id; the customer gets the error reply
                outcome = LoopOutcome(
                    reply=tenant_settings.agent.error_reply,
                    silent=False,
                    outcome="degraded",
                    error="deployment_api_key_unreadable",
                )
                summary_due, guarded = False, _Guarded()
            else:
                assert claim.context is not None  # read with every claim that is not skipped
                outcome, summary_due, guarded = await self._guarded_turn(
                    request, tenant_settings, tenant_router, trace_id, claim.context, time_budget
                )
            _make_storable(outcome, tenant_settings.agent.error_reply)
            if outcome.model_unavailable and not outcome.silent:
                # the worker keeps the question for the model's return: the customer reads (and the
                # history keeps) the waiting reply, not "try again"
                guarded.flags.append(MODEL_UNAVAILABLE)
                outcome.reply = tenant_settings.agent.waiting_reply
            result = TurnResult(
                reply=outcome.reply if not outcome.silent else None,
                silent=outcome.silent,
                trace_id=trace_id,
                model=outcome.model_id,
                fallback_used=outcome.fallback_used,
                tool_calls=outcome.tool_records,
                usage=TokenUsage.model_validate(
                    {
                        **outcome.usage.model_dump(),
                        "cost_usd": round(
                            outcome.cost_usd + guarded.cost_usd + sum(request.media_cost_usd.values()), 8
                        ),
                        "media_cost_usd": dict(request.media_cost_usd),
                    }
                ),
                flags=guarded.flags,
                # a replaced (output guardrail) reply or a silent turn sends no structured parts either
                parts=[] if outcome.silent or "output_replaced" in guarded.flags else outcome.parts,
            )
            total_ms = (time.perf_counter() - started) * 1000
            lead_check = None if result.silent else self._lead_check(tenant_settings)
            assert claim.conversation is not None  # read with every claim
            lead = await self._persist(
                claim.turn_id,
                request,
                trace_id,
                result,
                outcome,
                total_ms,
                guarded=guarded,
                conversation=claim.conversation,
                lead_window=tenant_settings.leads.intent_window_messages
                if lead_check == "heuristic"
                else None,
                claim=claim,
            )
            if lead is not None:
                lead_recorded(lead, trace_id)
            if self.redis is not None and claim.context is not None:
                await record_turn(
                    self.redis,
                    request.tenant_id,
                    unavailable=outcome.model_unavailable,
                    deployments=[d.id for d in tenant_router.deployments]
                    if outcome.model_unavailable
                    else [],
                    answered_by=outcome.model_id,
                )
            if lead_check == "model":
                await self._queue_lead_check(request, tenant_settings, trace_id)
            if summary_due and not outcome.model_unavailable:
                await self._queue_history_summary(request, claim.turn_id, trace_id)
        except BaseException as exc:
            # a crashed turn must not block the retry: release the claim now, not after the stale margin
            await asyncio.shield(self._release(claim.turn_id, exc))
            raise
        log.info(
            "turn_done",
            outcome=outcome.outcome,
            model=outcome.model_id,
            fallback_used=outcome.fallback_used,
            model_calls=outcome.model_calls,
            tool_calls=len(outcome.tool_records),
            cost_usd=result.usage.cost_usd,
            flags=result.flags,
            total_ms=round(total_ms, 1),
        )
        _count_turn(outcome.outcome, duration_s=total_ms / 1000, model=outcome.model_id)
        return result

    # --- guardrails and budget -------------------------------------------------------------------
    async def _guarded_turn(
        self,
        request: TurnRequest,
        tenant_settings: TenantSettings,
        tenant_router: TenantRouter,
        trace_id: str,
        context: _Context,
        time_budget: TurnBudget,
    ) -> tuple[LoopOutcome, tuple[str, uuid.UUID] | None, _Guarded]:
        """The budget check, the input guardrail, the loop, the output guardrail (module docstring)."""
        guarded = _Guarded()
        budget_settings = tenant_settings.channel(BudgetSettings)
        budget = context.budget
        if budget.level in ("warning", "exceeded"):
            guarded.flags.append(f"budget_{budget.level}")
            log.warning(
                f"budget_{budget.level}",
                spent_usd=round(budget.spent_usd, 6),
                budget_usd=budget.budget_usd,
                action=budget.action,
            )
        if budget.level == "exceeded" and budget.action == "handoff":
            reply = await self._hand_over(
                request, trace_id, "monthly model budget exceeded", budget_settings.holding_reply
            )
            return (
                LoopOutcome(reply=reply, silent=False, outcome="blocked", error="budget_exceeded"),
                None,
                guarded,
            )
        if budget.level == "exceeded":
            tenant_router = self._cheapest_router(request.tenant_id, tenant_settings)

        guard = tenant_settings.channel(GuardrailSettings)
        if guard.input.enabled and request.text.strip():
            record = await check_input(
                self.gateway,
                tenant_id=request.tenant_id,
                settings=tenant_settings,
                text=request.text,
                trace_id=trace_id,
                budget=time_budget,
            )
            guarded.records["input"] = record
            guarded.cost_usd += record.cost_usd
            if record.blocked:
                guarded.flags.append("input_blocked")
                if record.action == "handoff":
                    reply = await self._hand_over(
                        request,
                        trace_id,
                        "input guardrail: " + record.rationale[:200],
                        tenant_settings.agent.handoff_reply,
                    )
                else:
                    reply = guard.input.redirect_reply
                log.warning(
                    "turn_blocked_by_guardrail", stage="input", action=record.action, score=record.score
                )
                return (
                    LoopOutcome(reply=reply, silent=False, outcome="blocked", error="input_guardrail"),
                    False,
                    guarded,
                )

        messages, summary_due = await self._build_messages(
            request, tenant_settings, tenant_router, trace_id, context, time_budget
        )
        outcome = await run_tool_loop(
            gateway=self.gateway,
            tenant_router=tenant_router,
            settings=tenant_settings,
            messages=messages,
            registry=self.registry,
            make_ctx=self._context_factory(request, trace_id),
            trace_id=trace_id,
            budget=time_budget,
        )
        if guard.output.enabled and outcome.reply and not outcome.silent:
            tool_results = [str(m.get("content") or "") for m in messages if m.get("role") == "tool"]
            seen = [str(m.get("content") or "") for m in messages[1:] if m.get("role") != "tool"]
            record = check_output(
                outcome.reply,
                settings=guard.output,
                system_prompt=str(messages[0].get("content") or ""),
                tool_names=outcome.offered_tools,
                seen_texts=seen,
                tool_results=tool_results,
            )
            guarded.records["output"] = record
            if record.blocked:
                guarded.flags.append("output_replaced")
                metrics.GUARDRAIL_DECISIONS.labels("output", "block").inc()
                outcome.reply = guard.output.safe_reply
                log.warning("reply_replaced_by_guardrail", stage="output", findings=record.findings)
            else:
                metrics.GUARDRAIL_DECISIONS.labels("output", "allow").inc()
                log.info("guardrail_checked", stage="output", checker="rules", decision="allow")
        return outcome, summary_due, guarded

    def _cheapest_router(self, tenant_id: uuid.UUID, tenant_settings: TenantSettings) -> TenantRouter:
        """The Router of the tenant's cheapest group only (the exceeded budget's ``cheaper_group``)."""
        deployments = tenant_settings.llm.deployments or default_deployments(self.gateway.settings)
        group = cheapest_group(deployments)
        log.info("budget_cheaper_group", group=group)
        return self.gateway.router_for(
            group_router_key(tenant_id, f"group:{group}"),
            only_group(tenant_settings.llm, deployments, group),
            owner=tenant_id,
        )

    async def _hand_over(self, request: TurnRequest, trace_id: str, reason: str, reply: str) -> str:
        """Hand the conversation to a person without a model turn; ``reply`` is what the customer reads."""
        from switchboard.handoff import escalate_and_notify  # the handoff package imports the agent's

        try:
            await escalate_and_notify(
                self.sessions,
                self.gateway,
                tenant_id=request.tenant_id,
                conversation_id=request.conversation_id,
                reason=reason,
                trace_id=trace_id,
                actor=Actor.system(),
                redis=self.redis,
            )
        except (LookupError, InvalidTransition) as exc:
            log.warning("guarded_handoff_failed", error=f"{type(exc).__name__}: {exc}"[:300])
        return reply

    def _context_factory(self, request: TurnRequest, trace_id: str) -> Callable[..., ToolContext]:
        # the channel says whether its inbound text is untrusted (an e-mail): then read tools only
        untrusted = _untrusted_inbound(request.channel)

        def make_ctx(
            call_id: str, tool_name: str | None = None, arguments: dict[str, Any] | None = None
        ) -> ToolContext:
            return ToolContext(
                tenant_id=request.tenant_id,
                conversation_id=request.conversation_id,
                customer_id=request.customer_id,
                trace_id=trace_id,
                call_id=call_id,
                idempotency_key=(
                    idempotency_key_for(trace_id, tool_name, arguments or {}) if tool_name else None
                ),
                sessions=self.sessions,
                channel=request.channel,
                has_untrusted_content=untrusted,
            )

        return make_ctx

    # --- settings, claim ---------------------------------------------------------------------
    async def _claim(self, request: TurnRequest, trace_id: str) -> tuple[_Claim, TenantSettings]:
        """Claim the turn (module docstring, step 1) and read the tenant's settings in the same
        transaction (parsed once per content: :func:`~switchboard.tenant_settings.cached_tenant_settings`).

        Raises:
            TurnRejected: unknown tenant or conversation (404), mismatched ids (422).
        """
        async with session_scope(self.sessions) as session:
            found = (await session.exec(_claim_read(request))).one_or_none()
            if found is None:
                log.warning("turn_rejected_unknown_tenant")
                raise TurnRejected(404, f"tenant {request.tenant_id} not found")
            tenant, conversation, inbound, existing = found[:4]
            tenant_settings = cached_tenant_settings(tenant.settings_extensions, tenant_id=str(tenant.id))
            claim = await self._claim_in(
                session,
                request,
                trace_id,
                tenant_settings,
                conversation=conversation,
                existing=existing,
                inbound=inbound,
            )
            if claim.turn_id is not None and claim.skip_reason is None:
                claim.context = await self._read_context(session, request, tenant_settings, found)
            return claim, tenant_settings

    async def _read_context(
        self, session: AsyncSession, request: TurnRequest, tenant_settings: TenantSettings, found: Any
    ) -> _Context:
        """The budget position, the history after the last summary, the customer and their memory:
        ``found`` is the claim's row (:func:`_claim_read`), which carries all but the budget and the
        history (read here, in the claim's transaction)."""
        budget = await budget_state(
            session,
            tenant_id=request.tenant_id,
            settings=tenant_settings.channel(BudgetSettings),
            now=utcnow(),
        )
        rows = await read_history(
            session,
            tenant_id=request.tenant_id,
            conversation_id=request.conversation_id,
            roles=MODEL_ROLES,
            after_message_id=found.summary_through,
            exclude_message_id=request.inbound_message_id,
        )
        returning = closed_within(
            found.last_closed_at,
            window_days=tenant_settings.memory.returning_customer_window_days,
            now=utcnow(),
        )
        return _Context(
            budget,
            found.summary_text,
            list(rows),
            found.profile,
            found.memory or None,
            returning,
            bool(found.has_lead),
        )

    async def _claim_in(
        self,
        session: AsyncSession,
        request: TurnRequest,
        trace_id: str,
        tenant_settings: TenantSettings,
        *,
        conversation: Conversation | None,
        existing: Turn | None,
        inbound: Message | None,
    ) -> _Claim:
        """The claim inside the caller's transaction (see :meth:`_claim`), on the rows
        :func:`_claim_read` found: the tenant's conversation, the turn of the inbound id and the inbound
        row, each ``None`` when there is none."""
        scope = TenantScope(session, request.tenant_id)
        if conversation is None:
            log.warning("turn_rejected_unknown_conversation")
            raise TurnRejected(404, "conversation not found for this tenant")
        if conversation.customer_id != request.customer_id:
            log.warning("turn_rejected_customer_mismatch", customer_id=str(request.customer_id))
            raise TurnRejected(422, "customer_id does not match the conversation's customer")
        if existing is not None:
            if existing.tenant_id != request.tenant_id or existing.conversation_id != request.conversation_id:
                log.warning("turn_rejected_inbound_id_reused")
                raise TurnRejected(422, "inbound_message_id belongs to another conversation")
            if existing.status == TurnStatus.done and existing.result is not None:
                return _Claim(stored=TurnResult.model_validate(existing.result))
            age_s = (utcnow() - existing.updated_at).total_seconds()
            if age_s < tenant_settings.loop.turn_timeout_s + STALE_MARGIN_S:
                return _Claim()  # running elsewhere: wait
            connection = await session.connection()
            taken = await connection.execute(
                update(Turn)
                .where(col(Turn.id) == existing.id, col(Turn.updated_at) == existing.updated_at)
                .values(updated_at=utcnow())
            )
            if taken.rowcount != 1:
                return _Claim()  # another request took it over first: wait for its result
            log.warning("turn_taken_over", stale_s=round(age_s, 1))
            return _Claim(
                turn_id=existing.id, skip_reason=_skip_reason(conversation), conversation=conversation
            )
        inbound = await self._ensure_inbound_row(session, scope, request, conversation, inbound)
        turn_id = uuid.uuid4()
        connection = await session.connection()
        inserted = (
            await connection.execute(
                pg_insert(Turn.__table__)
                .values(
                    id=turn_id,
                    tenant_id=request.tenant_id,
                    conversation_id=request.conversation_id,
                    inbound_message_id=request.inbound_message_id,
                    trace_id=trace_id,
                    status=TurnStatus.running.value,
                    fallback_used=False,
                )
                .on_conflict_do_nothing(index_elements=["inbound_message_id"])
                .returning(Turn.__table__.c.id)
            )
        ).scalar_one_or_none()
        if inserted is None:
            return _Claim()  # another request claimed it a moment ago
        return _Claim(
            turn_id=turn_id,
            skip_reason=_skip_reason(conversation),
            conversation=conversation,
            inbound=inbound,
        )

    async def _ensure_inbound_row(
        self,
        session: AsyncSession,
        scope: TenantScope,
        request: TurnRequest,
        conversation: Conversation,
        row: Message | None,
    ) -> Message:
        """The inbound row as stored (``row``, read with the claim); inserted first when there is none
        (tests, ``switchboard simulate``).

        Raises:
            TurnRejected: the row belongs to another tenant (422).
        """
        if row is not None:
            if row.tenant_id != request.tenant_id:
                log.warning("turn_rejected_inbound_of_other_tenant")
                raise TurnRejected(422, "inbound_message_id belongs to another tenant")
            if row.conversation_id is None:
                row.conversation_id = request.conversation_id
            return row
        values: dict[str, Any] = {
            "id": request.inbound_message_id,
            "tenant_id": scope.tenant_id,
            "conversation_id": request.conversation_id,
            "channel": conversation.channel,
            "direction": MessageDirection.inbound.value,
            "role": MessageRole.user.value,
            "kind": "text",
            "text": request.text,
            "inbound_state": InboundState.done.value,
            "processing_attempts": 0,
            "processed_at": utcnow(),
            "created_at": utcnow(),
        }
        # ON CONFLICT: a concurrent duplicate request may insert the same row a moment earlier
        connection = await session.connection()
        await connection.execute(
            pg_insert(Message.__table__).values(**values).on_conflict_do_nothing(index_elements=["id"])
        )
        return Message(**values)  # as written (not added to the session: no second insert)

    # --- prompt and history --------------------------------------------------------------------
    async def _build_messages(
        self,
        request: TurnRequest,
        tenant_settings: TenantSettings,
        tenant_router: TenantRouter,
        trace_id: str,
        context: _Context,
        time_budget: TurnBudget,
    ) -> tuple[list[dict[str, Any]], tuple[str, uuid.UUID] | None]:
        llm = tenant_settings.llm
        rows = list(context.rows)
        returning, window_days = context.returning, tenant_settings.memory.returning_customer_window_days
        untrusted = _untrusted_inbound(request.channel)
        summary_text = context.summary_text
        # a long history is summarized after the reply (summarize_history), never before it: this turn
        # reads the messages verbatim and trimming bounds the prompt
        summary_due = len(rows) > llm.summarize_after_messages
        system = build_system_prompt(
            tenant_settings.agent,
            channel=request.channel,
            now=utcnow(),
            profile=context.profile,
            memory=context.memory,
            summary=summary_text,
            returning_customer=returning,
            returning_window_days=window_days,
            untrusted_inbound=untrusted,
        )
        conversation = [
            *model_messages(rows),
            {"role": "user", "content": request.text.strip() or EMPTY_MESSAGE_TEXT},
        ]
        # an untrusted channel's mail (every one, not only the newest) reaches the model as a data block
        if untrusted:
            conversation = fence_inbound(conversation)
        messages = [{"role": "system", "content": system}, *conversation]
        return messages, summary_due

    # --- persistence -----------------------------------------------------------------------------
    async def _persist(
        self,
        turn_id: uuid.UUID,
        request: TurnRequest,
        trace_id: str,
        result: TurnResult,
        outcome: LoopOutcome,
        total_ms: float,
        *,
        guarded: _Guarded,
        conversation: Conversation,
        lead_window: int | None,
        claim: _Claim,
    ) -> Lead | None:
        """Write the turn in one transaction (module docstring, step 7); with ``lead_window`` (the offline
        heuristic's intent check) the lead check runs in the same transaction, in a SAVEPOINT
        (:func:`switchboard.leads.capture_lead_in`: its failure never fails the turn), unless the
        conversation had a lead at the claim or the heuristic finds no intent in the turn's own rows
        (:meth:`_lead_may_follow`): then no savepoint and no read.

        Returns:
            The lead recorded with the turn (committed), or ``None``.
        """
        base = utcnow()
        lead: Lead | None = None
        async with session_scope(self.sessions) as session:
            scope = TenantScope(session, request.tenant_id)
            stored = list(outcome.new_messages)
            if result.reply:
                stored.append({"role": "assistant", "content": result.reply})
            staged = append_model_messages(
                session, conversation=conversation, messages=stored, trace_id=trace_id, at=base
            )
            # the tenant's systems hear of the reply (switchboard.events), only when an endpoint takes it
            # (as inbound does, switchboard.inbound.job): no outbox row per turn for every other tenant
            if result.reply and await has_subscriber(
                session, tenant_id=request.tenant_id, event_type="message.created"
            ):
                reply_row = staged[-1]
                stage_event(
                    session,
                    tenant_id=request.tenant_id,
                    event_type="message.created",
                    data={
                        "message_id": reply_row.id,
                        "conversation_id": conversation.id,
                        "channel": conversation.channel,
                        "direction": "outbound",
                        "role": "assistant",
                        "kind": "text",
                        "text": result.reply,
                    },
                )
            for receipt in outcome.tool_receipts:
                if receipt.get("recorded_by_source"):
                    continue  # e.g. MCP tools: their source already wrote a fuller receipt
                scope.add(
                    ToolReceipt(
                        tenant_id=request.tenant_id,
                        conversation_id=request.conversation_id,
                        trace_id=trace_id,
                        tool_name=receipt["name"][:128],
                        args_hash=hashlib.sha256(receipt["arguments"].encode()).hexdigest(),
                        idempotency_key=receipt["idempotency_key"],
                        outcome=receipt["outcome"],
                        error_type=receipt["error_type"],
                        duration_ms=receipt["duration_ms"],
                    )
                )
            # the input guardrail's check is a model call too (checker "model"/"offline_heuristic": the
            # gateway answered it); the output guardrail's rules are ours and stay in the harness
            check = guarded.records.get("input")
            guardrail_model_ms = check.duration_ms if check is not None and check.checker != "rules" else 0.0
            harness_ms = max(0.0, total_ms - outcome.model_ms - guardrail_model_ms - outcome.tool_ms)
            values: dict[str, Any] = {
                "status": TurnStatus.done.value,
                "outcome": outcome.outcome,
                "result": result.model_dump(mode="json"),
                "model": (outcome.model_id or None) and outcome.model_id[:64],
                "fallback_used": outcome.fallback_used,
                "usage": result.usage.model_dump(),
                "timings": {
                    "total_ms": round(total_ms, 3),
                    "model_ms": round(outcome.model_ms, 3),
                    "tool_ms": round(outcome.tool_ms, 3),
                    "guardrail_model_ms": round(guardrail_model_ms, 3),
                    "harness_ms": round(harness_ms, 3),
                    "model_calls": outcome.model_calls,
                    "tool_iterations": outcome.tool_iterations,
                    "forced_final_call": outcome.forced_final_call,
                    "overflow_retried": outcome.overflow_retried,
                    "models_used": outcome.models_used,
                    "effect": outcome.effect,
                    "unpriced_calls": outcome.unpriced_calls,
                },
                "guardrails": {stage: r.model_dump(mode="json") for stage, r in guarded.records.items()},
                "cost_usd": result.usage.cost_usd,
                "error": outcome.error,
                "finished_at": utcnow(),
                "updated_at": utcnow(),
            }
            if lead_window is not None and self._lead_may_follow(claim, staged, lead_window):
                # after the flush the savepoint starts with: the window reads this turn's rows too
                lead = await capture_lead_in(
                    session,
                    tenant_id=request.tenant_id,
                    conversation_id=request.conversation_id,
                    customer_id=request.customer_id,
                    window_messages=lead_window,
                    trace_id=trace_id,
                )
            connection = await session.connection()
            await connection.execute(update(Turn).where(col(Turn.id) == turn_id).values(**values))
        return lead

    @staticmethod
    def _lead_may_follow(claim: _Claim, staged: Sequence[Message], window_messages: int) -> bool:
        """Whether the heuristic lead check must run in the database (:func:`~switchboard.leads.
        capture_lead_in`): ``False`` when the conversation had a lead at the claim, or when the rows the
        turn holds in memory (the history it read, its inbound row, the rows it is writing) cover the
        window and show no intent. ``True`` otherwise: the check reads the window and the leads again
        and decides (a lead the turn's own ``create_lead`` call recorded is seen there)."""
        context = claim.context
        if context is None or claim.inbound is None:
            return True  # a taken-over turn: read nothing in memory, let the database decide
        if context.has_lead:
            return False
        rows = [*context.rows, claim.inbound, *staged]
        if context.summary_text is not None and (
            sum(row.role in ("user", "assistant") for row in rows) < window_messages
        ):
            return True  # older rows are behind the summary: the window needs them from the database
        return heuristic_may_find_intent(rows, window_messages=window_messages)

    def _lead_check(self, tenant_settings: TenantSettings) -> str | None:
        """How the after-turn intent check runs: ``None`` (leads off), ``heuristic`` (in the persist
        transaction) or ``model`` (a background job after the turn: :meth:`_queue_lead_check`)."""
        leads = tenant_settings.leads
        if not leads.enabled:
            return None
        use_model = leads.intent_check == "model" or (
            leads.intent_check == "auto" and not self.gateway.is_offline(tenant_settings.llm)
        )
        return "model" if use_model else "heuristic"

    async def _queue_lead_check(
        self, request: TurnRequest, tenant_settings: TenantSettings, trace_id: str
    ) -> None:
        """The model's intent check of an answered turn, never before the reply is sent: queued as the
        background job ``check_lead_intent`` (:mod:`switchboard.leads.jobs`). Without a queue it runs
        here, after the turn is written. Never raises (a failure to queue is logged)."""
        if self.redis is None:
            await capture_lead_by_model(
                self.sessions,
                self.gateway,
                settings=tenant_settings,
                tenant_id=request.tenant_id,
                conversation_id=request.conversation_id,
                customer_id=request.customer_id,
                trace_id=trace_id,
            )
            return
        from switchboard.queue.jobs import enqueue_lead_check

        try:
            await enqueue_lead_check(
                self.redis,
                tenant_id=request.tenant_id,
                conversation_id=request.conversation_id,
                customer_id=request.customer_id,
                inbound_message_id=request.inbound_message_id,
                trace_id=trace_id,
            )
        except Exception as exc:  # noqa: BLE001 (a lead is never worth a failed turn; logged)
            log.error("lead_check_not_queued", error=f"{type(exc).__name__}: {exc}"[:300])

    async def _queue_history_summary(self, request: TurnRequest, turn_id: uuid.UUID, trace_id: str) -> None:
        """The summary a long history asked for, never before the reply is sent: queued as the background
        job ``summarize_history`` (:mod:`switchboard.agent.history_summary`). Without a queue it runs
        here, after the turn is written. Never raises (a failure to queue is logged)."""
        if self.redis is None:
            await summarize_history(
                self.sessions,
                self.gateway,
                tenant_id=request.tenant_id,
                conversation_id=request.conversation_id,
                turn_id=turn_id,
                trace_id=trace_id,
            )
            return
        from switchboard.queue.jobs import enqueue_history_summary

        try:
            await enqueue_history_summary(
                self.redis,
                tenant_id=request.tenant_id,
                conversation_id=request.conversation_id,
                turn_id=turn_id,
                trace_id=trace_id,
            )
        except Exception as exc:  # noqa: BLE001 (the next long turn asks again; logged)
            log.error("history_summary_not_queued", error=f"{type(exc).__name__}: {exc}"[:300])

    async def _release(self, turn_id: uuid.UUID, error: BaseException) -> None:
        """Drop our ``running`` claim on a turn that failed, so a retry of the request claims it at once
        (nothing of the turn was persisted: :meth:`_persist` is one transaction)."""
        log.error("turn_failed_released", error=f"{type(error).__name__}: {error}"[:300])
        try:
            # the failure is often the database itself (a restart: "shutting down"); retry for about
            # 10 s, or the claim holds the conversation until the stale margin (minutes: faults.py)
            async for attempt in AsyncRetrying(
                stop=stop_after_attempt(RELEASE_ATTEMPTS), wait=wait_exponential_jitter(0.5, 4), reraise=True
            ):
                with attempt:
                    async with session_scope(self.sessions) as session:
                        connection = await session.connection()
                        await connection.execute(
                            delete(Turn).where(
                                col(Turn.id) == turn_id, col(Turn.status) == TurnStatus.running.value
                            )
                        )
        except Exception as exc:  # noqa: BLE001 (the stale margin takes it over later; logged)
            log.error(
                "turn_release_failed", error=f"{type(exc).__name__}: {exc}"[:300], attempts=RELEASE_ATTEMPTS
            )

    async def _finish_skipped(
        self, turn_id: uuid.UUID, request: TurnRequest, result: TurnResult, reason: str
    ) -> None:
        async with session_scope(self.sessions) as session:
            connection = await session.connection()
            await connection.execute(
                update(Turn)
                .where(col(Turn.id) == turn_id)
                .values(
                    status=TurnStatus.done.value,
                    outcome="skipped",
                    result=result.model_dump(mode="json"),
                    error=reason,
                    finished_at=utcnow(),
                    updated_at=utcnow(),
                )
            )


def _claim_read(request: TurnRequest) -> Any:
    """The claim's one read: ``(tenant, conversation, inbound row, turn, *context)`` of ``request``, or no
    row for an unknown tenant. The conversation is the tenant's only (``None`` otherwise); the inbound row
    (by id, any tenant: the claim refuses another tenant's) and the turn of the inbound id (any tenant and
    conversation: the claim refuses a reused id) are ``None`` when absent: each a join on a primary or
    unique key, at most one row. The context columns (:func:`_context_columns`) come with it, used only
    by a new claim. One statement where it was five (tenant, conversation, turn, inbound row, context).
    """
    tenants, conversations = Tenant.__table__.c, Conversation.__table__.c
    messages, turns = Message.__table__.c, Turn.__table__.c
    return (
        sa_select(Tenant, Conversation, Message, Turn, *_context_columns(request))
        .select_from(Tenant)
        .outerjoin(
            Conversation,
            and_(conversations.id == request.conversation_id, conversations.tenant_id == tenants.id),
        )
        # by their own keys only, not the tenant: the claim tells "another tenant's" from "none"
        .outerjoin(Message, messages.id == request.inbound_message_id)
        .outerjoin(Turn, turns.inbound_message_id == request.inbound_message_id)
        .where(tenants.id == request.tenant_id)
    )


def _context_columns(request: TurnRequest) -> list[Any]:
    """The last summary (text, through which message), the customer's profile and memory, when the
    customer's last other conversation closed ("returning customer": the window is the tenant's setting,
    read by the same statement, so :func:`~switchboard.memory.store.closed_within` decides after it) and
    whether the conversation has a lead: each a scalar subquery of the tenant's rows."""
    tenant_id, customer_id = request.tenant_id, request.customer_id
    turns, customers, memories = Turn.__table__.c, Customer.__table__.c, UserMemory.__table__.c
    last_summary = (
        sa_select(turns.summary_text, turns.summary_through_message_id)
        .where(
            turns.tenant_id == tenant_id,
            turns.conversation_id == request.conversation_id,
            turns.summary_through_message_id.is_not(None),
        )
        .order_by(turns.created_at.desc(), turns.id.desc())
        .limit(1)
        .subquery()
    )
    return [
        sa_select(last_summary.c.summary_text).scalar_subquery().label("summary_text"),
        sa_select(last_summary.c.summary_through_message_id).scalar_subquery().label("summary_through"),
        sa_select(customers.profile)
        .where(customers.id == customer_id, customers.tenant_id == tenant_id)
        .scalar_subquery()
        .label("profile"),
        sa_select(memories.summary)
        .where(memories.tenant_id == tenant_id, memories.customer_id == customer_id)
        .limit(1)
        .scalar_subquery()
        .label("memory"),
        last_closed_at(
            tenant_id=tenant_id, customer_id=customer_id, exclude_conversation_id=request.conversation_id
        ).label("last_closed_at"),
        exists()
        .where(
            Lead.__table__.c.tenant_id == tenant_id,
            Lead.__table__.c.conversation_id == request.conversation_id,
        )
        .label("has_lead"),
    ]


def _untrusted_inbound(channel: str) -> bool:
    """Whether ``channel``'s inbound text is untrusted (:attr:`Capabilities.untrusted_inbound`)."""
    capabilities = channel_capabilities(channel)
    return bool(capabilities and capabilities.untrusted_inbound)


def _make_storable(outcome: LoopOutcome, error_reply: str) -> None:
    """Model output as Postgres stores it and a channel sends it (:mod:`switchboard.storable`): the reply,
    the turn's tool-call messages and receipts without NUL or lone surrogates. A reply with nothing left
    becomes the tenant's ``error_reply`` (``degraded``, ``reply_unprintable``)."""
    if outcome.reply is not None:
        outcome.reply = clean_text(outcome.reply)
        if not outcome.silent and not outcome.reply.strip():
            outcome.reply, outcome.outcome, outcome.error = error_reply, "degraded", "reply_unprintable"
    outcome.new_messages = clean_tree(outcome.new_messages)
    outcome.tool_receipts = clean_tree(outcome.tool_receipts)
    outcome.model_id = outcome.model_id and clean_text(outcome.model_id)


def _skip_reason(conversation: Conversation) -> str | None:
    if conversation.status != ConversationStatus.ai:
        return f"conversation_status_{conversation.status}"
    return None


def _count_turn(outcome: str, *, duration_s: float | None = None, model: str | None = None) -> None:
    """``switchboard_turns_total`` (and the turn's duration), and the outcome on the ``agent.turn`` span."""
    metrics.TURNS.labels(outcome).inc()
    if duration_s is not None:
        metrics.TURN_SECONDS.observe(duration_s)
    current = trace.get_current_span()
    if current.is_recording():
        current.set_attribute("turn.outcome", outcome)
        if model:
            current.set_attribute("turn.model", model)
