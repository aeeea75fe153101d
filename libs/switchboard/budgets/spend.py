"""How much of its monthly budget a tenant has spent, and what the next turn does about it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from sqlalchemy import func, select
from sqlmodel import col
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.budgets.settings import BudgetSettings
from switchboard.db.models import Turn

__all__ = ["BudgetState", "budget_state", "month_start", "month_spend_usd"]

BudgetLevel = Literal["none", "ok", "warning", "exceeded"]


def month_start(now: datetime) -> datetime:
    """Midnight UTC of the first day of ``now``'s month (the budget period)."""
    now = now.astimezone(UTC)
    return now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


async def month_spend_usd(session: AsyncSession, *, tenant_id: uuid.UUID, now: datetime) -> float:
    """Sum of ``turns.cost_usd`` of the tenant since :func:`month_start` (``ix_turns_tenant_created``)."""
    total = await session.scalar(
        select(func.coalesce(func.sum(col(Turn.cost_usd)), 0.0)).where(
            col(Turn.tenant_id) == tenant_id, col(Turn.created_at) >= month_start(now)
        )
    )
    return float(total or 0.0)


@dataclass(frozen=True)
class BudgetState:
    """The tenant's budget position before a turn."""

    level: BudgetLevel
    """``none``: no budget set; ``warning``: past ``warn_ratio``; ``exceeded``: at or past the budget."""
    spent_usd: float
    budget_usd: float | None
    action: str | None = None
    """With ``exceeded``: the tenant's ``budget.action`` (``cheaper_group`` | ``handoff``)."""


async def budget_state(
    session: AsyncSession, *, tenant_id: uuid.UUID, settings: BudgetSettings, now: datetime
) -> BudgetState:
    """Where the tenant stands this month (one aggregate query; none without a budget)."""
    if settings.monthly_usd is None:
        return BudgetState("none", 0.0, None)
    spent = await month_spend_usd(session, tenant_id=tenant_id, now=now)
    if spent >= settings.monthly_usd:
        return BudgetState("exceeded", spent, settings.monthly_usd, settings.action)
    if spent >= settings.monthly_usd * settings.warn_ratio:
        return BudgetState("warning", spent, settings.monthly_usd)
    return BudgetState("ok", spent, settings.monthly_usd)
