"""The fixed-pipeline baseline the agent is compared with: one intent call, then a fixed route.

1. **Classify**: one model call (:data:`~switchboard.standins.offline_guard.INTENT_INSTRUCTION_MARKER`
   prompt) answers ``{"intent": ...}``, one of :data:`~switchboard.standins.offline_guard.INTENTS`.
2. **Route** (no model decides what to call):

   * ``knowledge``: retrieve-then-answer: ``search_knowledge_base(query=<message>)``, then one answer call;
   * ``product`` / ``order`` / ``store``: lookup-then-summarize: ``lookup_product`` (the SKU in the
     message, else the message), ``check_order_status`` (the order number in the message),
     ``find_store`` (the word after "in"/"near", else the message), then one summarizing call;
   * ``handoff``: the tenant's handoff reply (counted as a handoff; the copy's conversation is not
     escalated);
   * ``other`` (or a classification that failed): one answer call without tools.

Tools run through the same registry, context and MCP source as the agent's turns, so the two see the
same data; the answer call gets the tool call and its result as ordinary chat messages.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from switchboard.agent.tools import ToolRegistry
from switchboard.agent.turns import Orchestrator
from switchboard.contracts import TurnRequest, trace_id_for
from switchboard.llm.router import ModelCallFailed, ModelGateway, TenantRouter
from switchboard.llm.trimming import strip_reasoning
from switchboard.observability import get_logger
from switchboard.standins.offline_guard import INTENT_INSTRUCTION_MARKER, INTENTS
from switchboard.tenant_settings import TenantSettings

__all__ = ["PipelineRun", "run_pipeline", "classification_messages"]

log = get_logger(__name__)

_SKU = re.compile(r"\b[A-Z]{2,5}-\d{2,4}(?:-[A-Z])?\b")
_ORDER = re.compile(r"\b[A-Z]{1,4}-\d{3,}\b")
_PLACE = re.compile(r"\b(?:in|near|at)\s+([A-Z][\w-]+(?:\s[A-Z][\w-]+)?)")
ROUTE_TOOLS = {
    "knowledge": "search_knowledge_base",
    "product": "lookup_product",
    "order": "check_order_status",
    "store": "find_store",
}


@dataclass
class PipelineRun:
    """One task through the pipeline."""

    intent: str
    reply: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    handed_off: bool = False
    model_calls: int = 0
    malformed_tool_calls: int = 0
    latency_ms: float = 0.0
    models_used: list[str] = field(default_factory=list)
    error: str | None = None


def classification_messages(text: str) -> list[dict[str, Any]]:
    """The intent prompt: the intents, then the message."""
    system = (
        f"{INTENT_INSTRUCTION_MARKER} of: {', '.join(INTENTS)}. knowledge = a question the shop's documents "
        "answer (hours, policies, shipping, warranty); product = price or stock of an item; order = the "
        "status of an order; store = a store's location or hours; handoff = wants a person; other = "
        'anything else. Answer JSON only: {"intent": "<one of them>"}.'
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": text}]


def _arguments(intent: str, text: str) -> dict[str, Any] | None:
    if intent == "knowledge":
        return {"query": text[:500]}
    if intent == "product":
        sku = _SKU.search(text)
        return {"sku_or_name": sku.group(0) if sku else text[:200]}
    if intent == "order":
        number = _ORDER.search(text)
        return {"order_number": number.group(0)} if number else None
    if intent == "store":
        place = _PLACE.search(text)
        return {"city_or_coordinates": place.group(1) if place else text[:200]}
    return None


async def run_pipeline(
    orchestrator: Orchestrator,
    *,
    settings: TenantSettings,
    tenant_router: TenantRouter,
    request: TurnRequest,
) -> PipelineRun:
    """Answer ``request.text`` with the fixed pipeline (module docstring). Never raises for model or
    tool trouble: ``error`` says what failed and ``reply`` is the tenant's error reply."""
    gateway: ModelGateway = orchestrator.gateway
    registry: ToolRegistry = orchestrator.registry
    trace_id = trace_id_for(request.conversation_id, request.inbound_message_id)
    started = time.perf_counter()
    run = PipelineRun(intent="other", reply="")
    try:
        reply = await gateway.complete(
            tenant_router,
            classification_messages(request.text),
            tools=None,
            llm=settings.llm,
            trace_id=trace_id,
        )
        run.model_calls += 1
        run.models_used.append(reply.model_id or "?")
        try:
            intent = json.loads(strip_reasoning(reply.content).strip("` \n").removeprefix("json"))["intent"]
        except (json.JSONDecodeError, KeyError, TypeError):
            intent = "other"
        run.intent = intent if intent in INTENTS else "other"
        if run.intent == "handoff":
            run.reply, run.handed_off = settings.agent.handoff_reply, True
            return run
        make_ctx = orchestrator._context_factory(request, trace_id)  # the agent's own tool context
        definitions, owners = await registry.definitions(make_ctx("definitions"))
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": f"You are {settings.agent.name}.\n\n{settings.agent.instructions}"},
            {"role": "user", "content": request.text},
        ]
        tool_name = ROUTE_TOOLS.get(run.intent)
        arguments = _arguments(run.intent, request.text) if tool_name else None
        offered = [d for d in definitions if d["function"]["name"] == tool_name]
        if tool_name and arguments is not None and offered and tool_name in owners:
            call_id = f"call_pipeline_{uuid.uuid4().hex[:12]}"
            run.tool_calls.append({"name": tool_name, "arguments": arguments})
            try:
                output = await owners[tool_name].call(
                    tool_name, arguments, make_ctx(call_id, tool_name, arguments)
                )
                content = (
                    output.content
                    if isinstance(output.content, str)
                    else json.dumps(output.content, default=str)
                )
            except Exception as exc:  # noqa: BLE001 (a tool error becomes the result, as in the agent's loop)
                run.malformed_tool_calls += int(getattr(exc, "error_type", "") == "invalid_arguments")
                content = json.dumps(
                    {
                        "error": {
                            "type": getattr(exc, "error_type", "tool_exception"),
                            "message": str(exc)[:300],
                        }
                    }
                )
            messages += [
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": tool_name, "arguments": json.dumps(arguments)},
                        }
                    ],
                },
                {
                    "role": "tool",
                    "tool_call_id": call_id,
                    "content": content[: settings.loop.max_tool_result_chars],
                },
            ]
        answer = await gateway.complete(
            tenant_router, messages, tools=offered or None, llm=settings.llm, trace_id=trace_id
        )
        run.model_calls += 1
        run.models_used.append(answer.model_id or "?")
        run.reply = strip_reasoning(answer.content) or settings.agent.error_reply
    except ModelCallFailed as exc:
        run.error = f"model_failed: {exc}"[:300]
        run.reply = settings.agent.error_reply
    finally:
        run.latency_ms = (time.perf_counter() - started) * 1000
    return run
