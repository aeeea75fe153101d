"""A query helper that cannot return another tenant's rows.

Every read of a tenant-owned table goes through :class:`TenantScope`: its ``select`` always adds
``WHERE tenant_id = :tenant``, its ``get`` returns ``None`` for another tenant's id, and ``add``
refuses a row that names a different tenant.
"""

from __future__ import annotations

import uuid
from typing import Any, TypeVar

from sqlmodel import select
from sqlmodel.ext.asyncio.session import AsyncSession
from sqlmodel.sql.expression import SelectOfScalar

from switchboard.db.models.base import TenantOwned
from switchboard.errors import CrossTenantAccess

__all__ = ["TenantScope"]

T = TypeVar("T", bound=TenantOwned)


class TenantScope:
    """Reads and writes of tenant-owned tables, bound to one tenant.

    Args:
        session: an open async session (the caller owns its transaction).
        tenant_id: the tenant established by authentication (channel account, admin token).
    """

    def __init__(self, session: AsyncSession, tenant_id: uuid.UUID) -> None:
        if not isinstance(tenant_id, uuid.UUID):
            raise TypeError(f"tenant_id must be a UUID, got {type(tenant_id).__name__}")
        self.session = session
        self.tenant_id = tenant_id

    def select(self, model: type[T], *where: Any) -> SelectOfScalar[T]:
        """``SELECT model WHERE tenant_id = <this tenant> AND <where...>``."""
        _require_tenant_owned(model)
        return select(model).where(model.tenant_id == self.tenant_id, *where)

    async def all(self, model: type[T], *where: Any) -> list[T]:
        """Every row of ``model`` of this tenant matching ``where``."""
        return list((await self.session.exec(self.select(model, *where))).all())

    async def first(self, model: type[T], *where: Any) -> T | None:
        return (await self.session.exec(self.select(model, *where).limit(1))).first()

    async def get(self, model: type[T], row_id: Any) -> T | None:
        """The row with primary key ``row_id`` if it belongs to this tenant, else ``None``."""
        _require_tenant_owned(model)
        return (await self.session.exec(self.select(model, model.id == row_id))).first()

    def add(self, row: T) -> T:
        """Stage ``row`` for insert; fills a missing ``tenant_id``.

        Raises:
            CrossTenantAccess: the row names another tenant.
        """
        _require_tenant_owned(type(row))
        if getattr(row, "tenant_id", None) is None:
            row.tenant_id = self.tenant_id
        elif row.tenant_id != self.tenant_id:
            raise CrossTenantAccess(str(self.tenant_id), str(row.tenant_id), type(row).__tablename__)
        self.session.add(row)
        return row


def _require_tenant_owned(model: type) -> None:
    if not (isinstance(model, type) and issubclass(model, TenantOwned)):
        raise TypeError(f"{getattr(model, '__name__', model)} is not a tenant-owned table")
