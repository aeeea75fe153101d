"""Per-tenant toolboxes: which MCP tools a tenant may call and the ``custom_config`` each receives.

Used by the admin API and the ``switchboard tools`` commands. One ``mcp_tenant_tools`` row per
tenant and tool; no row (or ``enabled = false``) means the tenant's model never sees the tool and a
call fails closed with ``Forbidden``.
"""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import BaseModel
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import AuditLog, McpTenantTool, utcnow
from switchboard.db.tenant_scope import TenantScope
from switchboard.errors import SwitchboardError
from switchboard.tools.business import BUSINESS_TOOLS

__all__ = [
    "KNOWN_TOOLS",
    "ToolAssignment",
    "UnknownTool",
    "list_assignments",
    "set_enabled",
    "configure_tool",
    "enable_all",
]

KNOWN_TOOLS: tuple[str, ...] = tuple(contract.name for contract in BUSINESS_TOOLS)
"""Tools the bundled MCP server offers."""


class UnknownTool(SwitchboardError):
    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"unknown tool {name!r}; known tools: {', '.join(KNOWN_TOOLS)}")


class ToolAssignment(BaseModel):
    """One tool as a tenant has it."""

    tool_name: str
    enabled: bool
    custom_config: dict[str, Any]
    kind: str | None = None
    """``read`` | ``write`` for bundled tools."""


_KIND = {contract.name: contract.policy.kind for contract in BUSINESS_TOOLS}


async def list_assignments(session: AsyncSession, tenant_id: uuid.UUID) -> list[ToolAssignment]:
    """Every bundled tool (disabled when the tenant has no row) plus any other assigned tool, by name."""
    rows = {row.tool_name: row for row in await TenantScope(session, tenant_id).all(McpTenantTool)}
    names = sorted(set(KNOWN_TOOLS) | set(rows))
    return [
        ToolAssignment(
            tool_name=name,
            enabled=bool(rows[name].enabled) if name in rows else False,
            custom_config=dict(rows[name].custom_config) if name in rows else {},
            kind=_KIND.get(name),
        )
        for name in names
    ]


async def _row(session: AsyncSession, tenant_id: uuid.UUID, tool_name: str) -> tuple[McpTenantTool, bool]:
    """The tenant's row for ``tool_name`` and whether it was just created (disabled)."""
    if tool_name not in KNOWN_TOOLS:
        raise UnknownTool(tool_name)
    scope = TenantScope(session, tenant_id)
    row = await scope.first(McpTenantTool, McpTenantTool.tool_name == tool_name)
    if row is None:
        return scope.add(McpTenantTool(tenant_id=tenant_id, tool_name=tool_name, enabled=False)), True
    return row, False


async def set_enabled(
    session: AsyncSession, tenant_id: uuid.UUID, tool_name: str, *, enabled: bool, actor: str = "admin"
) -> ToolAssignment:
    """Enable or disable one tool for a tenant (audited).

    Raises:
        UnknownTool: not a tool the bundled server offers.
    """
    row, is_new = await _row(session, tenant_id, tool_name)
    before = None if is_new else bool(row.enabled)
    row.enabled = enabled
    row.updated_at = utcnow()
    session.add(
        AuditLog(
            tenant_id=tenant_id,
            actor=actor,
            action="tool_enabled" if enabled else "tool_disabled",
            target_type="mcp_tenant_tool",
            target_id=tool_name,
            details={"before": {"enabled": before}, "after": {"enabled": enabled}},
        )
    )
    await session.flush()
    return ToolAssignment(
        tool_name=tool_name,
        enabled=enabled,
        custom_config=dict(row.custom_config or {}),
        kind=_KIND.get(tool_name),
    )


async def configure_tool(
    session: AsyncSession,
    tenant_id: uuid.UUID,
    tool_name: str,
    config: dict[str, Any],
    *,
    actor: str = "admin",
) -> ToolAssignment:
    """Replace a tool's ``custom_config`` for a tenant (audited); the enabled flag is unchanged.

    Raises:
        UnknownTool: not a tool the bundled server offers.
        ValueError: ``config`` is not a JSON object.
    """
    if not isinstance(config, dict):
        raise ValueError("tool configuration must be a JSON object")
    row, _ = await _row(session, tenant_id, tool_name)
    before = dict(row.custom_config or {})
    row.custom_config = dict(config)
    row.updated_at = utcnow()
    session.add(
        AuditLog(
            tenant_id=tenant_id,
            actor=actor,
            action="tool_configured",
            target_type="mcp_tenant_tool",
            target_id=tool_name,
            details={"before": before, "after": config},
        )
    )
    await session.flush()
    return ToolAssignment(
        tool_name=tool_name, enabled=bool(row.enabled), custom_config=dict(config), kind=_KIND.get(tool_name)
    )


async def enable_all(session: AsyncSession, tenant_id: uuid.UUID, *, actor: str = "system") -> None:
    """Enable every bundled tool for a tenant (the demo tenant's seed)."""
    for name in KNOWN_TOOLS:
        await set_enabled(session, tenant_id, name, enabled=True, actor=actor)
