"""Row-level security for the tool server (migration ``0012_tool_server_rls``).

:func:`enter_tenant_role` switches the current transaction to the restricted role and names its
tenant; from then on Postgres itself shows and accepts only that tenant's rows of every tenant table,
whatever a query forgets to filter. ``SET LOCAL`` / ``set_config(..., true)`` end with the
transaction, so a pooled connection never carries the role or tenant into the next one.
"""

from __future__ import annotations

import re
import uuid

from sqlalchemy import text
from sqlmodel.ext.asyncio.session import AsyncSession

__all__ = ["TOOLS_ROLE", "enter_tenant_role"]

TOOLS_ROLE = "switchboard_tools"
"""The role migration 0011 creates; its policy restricts it to ``app.tenant_id``."""
_ROLE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


async def enter_tenant_role(session: AsyncSession, tenant_id: uuid.UUID, *, role: str = TOOLS_ROLE) -> None:
    """Run the rest of ``session``'s transaction as ``role`` scoped to ``tenant_id``.

    Raises:
        ValueError: ``role`` is not a plain lower-case identifier (it is interpolated into SQL).
        sqlalchemy.exc.DBAPIError: the role does not exist or the user may not ``SET ROLE`` to it.
    """
    if not _ROLE_NAME.match(role):
        raise ValueError(f"not a role name: {role!r}")
    await session.exec(text(f"SET LOCAL ROLE {role}"))
    await session.exec(
        text("SELECT set_config('app.tenant_id', :tenant, true)"), params={"tenant": str(tenant_id)}
    )
