"""The agent: tools, the bounded tool loop and turn handling (``POST /v1/turns``).

Per-tenant settings (agent, loop, llm sections) live in :mod:`switchboard.tenant_settings`.

Names are imported on first use (PEP 562): LiteLLM takes seconds to import, and light users of
this package (``switchboard simulate`` talking to a running orchestrator) should not pay for it.
"""

from __future__ import annotations

import importlib
from typing import Any

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


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'switchboard.agent' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"switchboard.agent.{module}"), name)
    globals()[name] = value
    return value
