"""The agent: per-tenant settings, tools, the bounded tool loop and turn handling (``POST /v1/turns``)."""

from switchboard.agent.builtin_tools import BUILTIN_TOOL_NAMES, BuiltinToolSet, CustomerProfileUpdate
from switchboard.agent.loop import LoopOutcome, run_tool_loop
from switchboard.agent.routes import orchestrator_from_app, turns_router
from switchboard.agent.settings import AgentSettings, LoopLimits, TenantSettings, tenant_settings_from
from switchboard.agent.tools import (
    ToolContext,
    ToolError,
    ToolOutput,
    ToolRegistry,
    ToolSet,
    idempotency_key_for,
)
from switchboard.agent.turns import Orchestrator, TurnRejected

__all__ = [
    "AgentSettings",
    "BUILTIN_TOOL_NAMES",
    "BuiltinToolSet",
    "CustomerProfileUpdate",
    "LoopLimits",
    "LoopOutcome",
    "Orchestrator",
    "TenantSettings",
    "ToolContext",
    "ToolError",
    "ToolOutput",
    "ToolRegistry",
    "ToolSet",
    "TurnRejected",
    "idempotency_key_for",
    "orchestrator_from_app",
    "run_tool_loop",
    "tenant_settings_from",
    "turns_router",
]
