"""``switchboard eval``: tasks through the real turn path on a copy of a tenant, and the pipeline baseline.

For each task and repeat: a customer of the copy (the task's ``customer`` external id, or a fresh
one) gets a new conversation, and :meth:`Orchestrator.handle_turn` answers the task's text exactly as
it answers a channel message (budget, guardrails, history, the tool loop, persistence). Then the
same text goes through :func:`~switchboard.evals.pipeline.run_pipeline` in another conversation.
Nobody is messaged: the copy has no channel accounts and the harness never runs the outbox
delivery (:mod:`switchboard.evals.copy`).

Every run is one JSON line in the traces file (runner, task, trace id, reply, tool calls with their
arguments, checks, timings, guardrails, the messages the turn stored). The report
(:class:`EvalReport`) gives per runner and category: success rate, model calls, latency p50/p95,
iteration-cap hits, malformed or unknown tool calls, and on traps the answers given instead of a
refusal or handoff (the hallucination rate); it names the deployments that answered and says when
they were the offline model.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.agent.tools import ToolSet
from switchboard.agent.turns import Orchestrator
from switchboard.contracts import TurnRequest, TurnResult, trace_id_for
from switchboard.conversations import start_conversation
from switchboard.db.engine import session_scope
from switchboard.db.models import Conversation, Customer, Message, Turn
from switchboard.evals.copy import copy_tenant, drop_copy
from switchboard.evals.pipeline import run_pipeline
from switchboard.evals.tasks import CATEGORIES, EvalTask, Observation, is_refusal, run_checks
from switchboard.guardrails.settings import GuardrailSettings
from switchboard.llm.config import default_deployments
from switchboard.llm.router import ModelGateway
from switchboard.observability import get_logger
from switchboard.settings import Settings
from switchboard.tenant_settings import TenantSettings, tenant_settings_from

__all__ = ["RunRecord", "CategoryStats", "EvalReport", "run_eval", "percentile", "format_report"]

log = get_logger(__name__)

MALFORMED_ERRORS = frozenset({"unknown_tool", "invalid_arguments"})


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) by nearest rank (0.0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


@dataclass
class RunRecord:
    """One task run by one runner (``agent`` | ``pipeline``): one line of the traces file."""

    runner: str
    task_id: str
    category: str
    repeat: int
    trace_id: str
    text: str
    reply: str
    passed: bool
    checks: list[dict[str, Any]]
    tool_calls: list[dict[str, Any]]
    handed_off: bool
    refused: bool
    model_calls: int
    latency_ms: float
    iteration_cap_hit: bool = False
    malformed_tool_calls: int = 0
    models_used: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    guardrails: dict[str, Any] = field(default_factory=dict)
    intent: str | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None


@dataclass
class CategoryStats:
    """One runner's figures for one category."""

    runs: int
    success_rate: float
    model_calls_mean: float
    latency_p50_ms: float
    latency_p95_ms: float
    iteration_cap_hits: int
    malformed_tool_calls: int
    trap_answers: int
    """Trap runs answered instead of refused or handed off (0 outside ``trap``)."""
    hallucination_rate: float | None
    """``trap_answers / runs`` on traps; ``None`` elsewhere."""


@dataclass
class EvalReport:
    tenant: str
    tasks_file: str
    repeat: int
    model_group: str | None
    models: list[str]
    """Deployments that answered (``model_info.id``), agent and pipeline."""
    offline_model: bool
    """Every answering deployment was the offline model server: the figures say nothing about a model."""
    agent: dict[str, CategoryStats]
    pipeline: dict[str, CategoryStats]
    traces_file: str
    guardrails: str
    """How the input guardrail ran (``on``/``off``)."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _stats(records: list[RunRecord], category: str) -> CategoryStats:
    rows = [r for r in records if r.category == category]
    n = len(rows)
    traps = category == "trap"
    answered = sum(1 for r in rows if not r.refused) if traps else 0
    return CategoryStats(
        runs=n,
        success_rate=round(sum(r.passed for r in rows) / n, 4) if n else 0.0,
        model_calls_mean=round(sum(r.model_calls for r in rows) / n, 3) if n else 0.0,
        latency_p50_ms=round(percentile([r.latency_ms for r in rows], 0.5), 1),
        latency_p95_ms=round(percentile([r.latency_ms for r in rows], 0.95), 1),
        iteration_cap_hits=sum(r.iteration_cap_hit for r in rows),
        malformed_tool_calls=sum(r.malformed_tool_calls for r in rows),
        trap_answers=answered,
        hallucination_rate=(round(answered / n, 4) if n else 0.0) if traps else None,
    )


async def _conversation_for(
    session: AsyncSession, tenant_id: uuid.UUID, external_id: str
) -> tuple[Customer, Conversation]:
    customer = (
        await session.exec(
            select(Customer).where(
                Customer.tenant_id == tenant_id,
                Customer.channel == "whatsapp",
                Customer.external_user_id == external_id,
            )
        )
    ).first()
    if customer is None:
        customer = Customer(tenant_id=tenant_id, channel="whatsapp", external_user_id=external_id)
        session.add(customer)
        await session.flush()
    conversation = await start_conversation(
        session, customer=customer, channel_account_id=None, reason="switchboard eval"
    )
    return customer, conversation


async def _request(
    sessions: async_sessionmaker[AsyncSession], tenant_id: uuid.UUID, task: EvalTask, label: str
) -> TurnRequest:
    external = task.customer or f"eval:{task.id}:{label}"
    async with session_scope(sessions) as session:
        customer, conversation = await _conversation_for(session, tenant_id, external)
        return TurnRequest(
            tenant_id=tenant_id,
            conversation_id=conversation.id,
            inbound_message_id=uuid.uuid4(),
            channel="whatsapp",
            customer_id=customer.id,
            text=task.text,
        )


@dataclass
class _Harness:
    orchestrator: Orchestrator
    sessions: async_sessionmaker[AsyncSession]
    tenant_id: uuid.UUID
    """The evaluation copy."""
    settings: TenantSettings


async def _agent_run(harness: _Harness, task: EvalTask, repeat: int) -> RunRecord:
    orchestrator, sessions = harness.orchestrator, harness.sessions
    max_iterations = harness.settings.loop.max_tool_iterations
    request = await _request(sessions, harness.tenant_id, task, f"agent:{repeat}")
    started = time.perf_counter()
    error = None
    try:
        result = await orchestrator.handle_turn(request)
    except Exception as exc:  # noqa: BLE001 (one broken task must not end the evaluation; recorded)
        error = f"{type(exc).__name__}: {exc}"[:300]
        result = TurnResult(reply="[turn failed]", trace_id="")
    latency_ms = (time.perf_counter() - started) * 1000
    async with sessions() as session:
        turn = (
            await session.exec(select(Turn).where(Turn.inbound_message_id == request.inbound_message_id))
        ).first()
        rows = (
            await session.exec(
                select(Message)
                .where(
                    Message.conversation_id == request.conversation_id, Message.trace_id == result.trace_id
                )
                .order_by(col(Message.created_at))
            )
        ).all()
        conversation = await session.get(Conversation, request.conversation_id)
    calls = []
    for row in rows:
        for call in row.tool_calls or []:
            try:
                arguments = json.loads(call["function"].get("arguments") or "{}")
            except json.JSONDecodeError:
                arguments = None
            calls.append({"name": call["function"]["name"], "arguments": arguments})
    timings = turn.timings if turn is not None else {}
    guardrails = turn.guardrails if turn is not None else {}
    handed_off = (conversation is not None and conversation.status == "human") or any(
        c.name == "escalate_to_human" and c.outcome == "ok" for c in result.tool_calls
    )
    observation = Observation(
        reply=result.reply or "",
        tool_calls=calls,
        handed_off=handed_off,
        blocked="input_blocked" in result.flags,
    )
    checks = run_checks(task, observation)
    return RunRecord(
        runner="agent",
        task_id=task.id,
        category=task.category,
        repeat=repeat,
        trace_id=result.trace_id,
        text=task.text,
        reply=result.reply or "",
        passed=all(c["passed"] for c in checks),
        checks=checks,
        tool_calls=calls,
        handed_off=handed_off,
        refused=is_refusal(observation),
        model_calls=int(timings.get("model_calls", 0)) + (1 if "input" in guardrails else 0),
        latency_ms=round(timings.get("total_ms", latency_ms), 3),
        iteration_cap_hit=int(timings.get("tool_iterations", 0)) >= max_iterations > 0,
        malformed_tool_calls=sum(1 for c in result.tool_calls if c.error_type in MALFORMED_ERRORS),
        models_used=list(timings.get("models_used") or ([result.model] if result.model else [])),
        flags=result.flags,
        guardrails=guardrails,
        messages=[{"role": r.role, "text": r.text, "tool_calls": r.tool_calls} for r in rows],
        error=error,
    )


async def _pipeline_run(harness: _Harness, task: EvalTask, repeat: int) -> RunRecord:
    request = await _request(harness.sessions, harness.tenant_id, task, f"pipeline:{repeat}")
    router = harness.orchestrator.gateway.router_for(harness.tenant_id, harness.settings.llm)
    run = await run_pipeline(
        harness.orchestrator, settings=harness.settings, tenant_router=router, request=request
    )
    observation = Observation(reply=run.reply, tool_calls=run.tool_calls, handed_off=run.handed_off)
    checks = run_checks(task, observation)
    return RunRecord(
        runner="pipeline",
        task_id=task.id,
        category=task.category,
        repeat=repeat,
        trace_id=trace_id_for(request.conversation_id, request.inbound_message_id),
        text=task.text,
        reply=run.reply,
        passed=all(c["passed"] for c in checks),
        checks=checks,
        tool_calls=run.tool_calls,
        handed_off=run.handed_off,
        refused=is_refusal(observation),
        model_calls=run.model_calls,
        latency_ms=round(run.latency_ms, 3),
        malformed_tool_calls=run.malformed_tool_calls,
        models_used=run.models_used,
        intent=run.intent,
        error=run.error,
    )


async def run_eval(
    settings: Settings,
    sessions: async_sessionmaker[AsyncSession],
    gateway: ModelGateway,
    *,
    tenant: str,
    tasks: list[EvalTask],
    tasks_file: str,
    traces_path: Path,
    repeat: int = 1,
    model_group: str | None = None,
    toolsets: Sequence[ToolSet] = (),
    keep_copy: bool = False,
) -> EvalReport:
    """Run ``tasks`` ``repeat`` times through the agent and the pipeline on a copy of ``tenant``.

    Raises:
        TenantNotFound: unknown tenant.
        ValueError: ``model_group`` is not one of the tenant's groups; ``repeat`` < 1.
    """
    if repeat < 1:
        raise ValueError("--repeat must be at least 1")
    async with session_scope(sessions) as session:
        copy = await copy_tenant(session, settings, source=tenant, model_group=model_group)
        copy_id = copy.id
        tenant_settings = tenant_settings_from(copy.settings_extensions, tenant_id=str(copy_id))
    harness = _Harness(
        Orchestrator(sessions=sessions, gateway=gateway, toolsets=toolsets),
        sessions,
        copy_id,
        tenant_settings,
    )
    records: list[RunRecord] = []
    traces_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with traces_path.open("w", encoding="utf-8") as traces:
            for n in range(1, repeat + 1):
                for task in tasks:
                    for runner in ("agent", "pipeline"):
                        run = _agent_run if runner == "agent" else _pipeline_run
                        record = await run(harness, task, n)
                        records.append(record)
                        _write(traces, record)
                        log.info(
                            "eval_task_run",
                            runner=runner,
                            task_id=task.id,
                            repeat=n,
                            passed=record.passed,
                            trace_id=record.trace_id,
                            latency_ms=round(record.latency_ms, 1),
                        )
    finally:
        if not keep_copy:
            async with session_scope(sessions) as session:
                await drop_copy(session, copy_id)
    deployments = {d.id: d for d in (tenant_settings.llm.deployments or default_deployments(settings))}
    models = sorted({m for r in records for m in r.models_used if m and m != "?"})
    offline = bool(models) and all(
        deployments.get(m) is not None and deployments[m].provider == "offline" for m in models
    )
    guard = tenant_settings.channel(GuardrailSettings).input.enabled
    return EvalReport(
        tenant=tenant,
        tasks_file=tasks_file,
        repeat=repeat,
        model_group=model_group,
        models=models,
        offline_model=offline,
        agent={c: _stats([r for r in records if r.runner == "agent"], c) for c in CATEGORIES},
        pipeline={c: _stats([r for r in records if r.runner == "pipeline"], c) for c in CATEGORIES},
        traces_file=str(traces_path),
        guardrails="on" if guard else "off",
    )


def _write(out: TextIO, record: RunRecord) -> None:
    out.write(json.dumps(asdict(record), ensure_ascii=False, default=str) + "\n")
    out.flush()


def format_report(report: EvalReport) -> str:
    """The report as a fixed-width table (agent and pipeline side by side per category)."""
    lines = [
        f"tenant {report.tenant} (a copy; nobody was messaged)   tasks {report.tasks_file}   repeat {report.repeat}",
        f"models: {', '.join(report.models) or '-'}"
        + (
            "   [OFFLINE MODEL: deterministic stand-in, the figures say nothing about a real model]"
            if report.offline_model
            else ""
        )
        + (f"   group {report.model_group}" if report.model_group else "")
        + f"   input guardrail {report.guardrails}",
        "",
        f"{'category':<10}{'runner':<10}{'runs':>5}{'success':>9}{'calls':>7}{'p50 ms':>9}{'p95 ms':>9}"
        f"{'cap hits':>9}{'bad calls':>10}{'trap answers':>14}",
    ]
    for category in CATEGORIES:
        for runner, stats in (("agent", report.agent[category]), ("pipeline", report.pipeline[category])):
            trap = (
                f"{stats.trap_answers} ({stats.hallucination_rate:.0%})"
                if stats.hallucination_rate is not None
                else "-"
            )
            lines.append(
                f"{category:<10}{runner:<10}{stats.runs:>5}{stats.success_rate:>9.0%}{stats.model_calls_mean:>7.2f}"
                f"{stats.latency_p50_ms:>9.1f}{stats.latency_p95_ms:>9.1f}{stats.iteration_cap_hits:>9}"
                f"{stats.malformed_tool_calls:>10}{trap:>14}"
            )
    lines.append(f"\ntraces: {report.traces_file}")
    return "\n".join(lines)
