"""Tenant business tools over MCP (docs/tools.md, docs/decisions/tenant-injected-into-tools.md).

* :mod:`~switchboard.tools.context` — the turn as a tool call sees it, and the one idempotency key
* :mod:`~switchboard.tools.contracts` — tool contracts, injected parameters, error text on the wire
* :mod:`~switchboard.tools.business` — the six business tools (shapes, policies, handlers)
* :mod:`~switchboard.tools.server` — the MCP server (``mcp_tools`` service): auth, tenant checks
* :mod:`~switchboard.tools.mcp_client` — the orchestrator's tool source (discovery, toolbox, contracts,
  receipts); imported on its own (it needs the MCP client SDK)
* :mod:`~switchboard.tools.toolbox`, :mod:`~switchboard.tools.importers`, :mod:`~switchboard.tools.routes` —
  per-tenant toolboxes, CSV import, the admin API
"""

from switchboard.tools.context import ToolContext, ToolOutput, idempotency_key_for
from switchboard.tools.contracts import (
    CONTRACT_META_KEY,
    FORBIDDEN_MESSAGE,
    INJECTED_PARAMS,
    ToolCallContext,
    ToolContract,
    ToolPolicy,
)

__all__ = [
    "CONTRACT_META_KEY",
    "FORBIDDEN_MESSAGE",
    "INJECTED_PARAMS",
    "ToolCallContext",
    "ToolContract",
    "ToolPolicy",
    "ToolContext",
    "ToolOutput",
    "idempotency_key_for",
]
