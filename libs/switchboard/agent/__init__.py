"""The agent: tools, the bounded tool loop and turn handling (``POST /v1/turns``).

Per-tenant settings (agent, loop, llm sections) live in :mod:`switchboard.tenant_settings`.

Names are imported on first use (PEP 562): LiteLLM takes seconds to import, and light users of
this package (``switchboard simulate`` talking to a running orchestrator) should not pay for it.
"""

from __future__ import annotations

from switchboard.lazy_imports import lazy_getattr

_EXPORTS = {
    "BUILTIN_TOOL_NAMES": "builtin_tools",
    "BuiltinToolSet": "builtin_tools",
    "CustomerProfileUpdate": "builtin_tools",
    "LoopOutcome": "loop",
    "run_tool_loop": "loop",
    "orchestrator_from_app": "routes",
    "turns_router": "routes",
    "ToolContext": "tools",
    "ToolError": "tools",
    "ToolOutput": "tools",
    "ToolRegistry": "tools",
    "ToolSet": "tools",
    "idempotency_key_for": "tools",
    "Orchestrator": "turns",
    "TurnRejected": "turns",
}

__all__ = sorted(_EXPORTS)


__getattr__ = lazy_getattr(__name__, _EXPORTS)
