"""Fixtures of a tenant with its own WhatsApp number, and of one whose agent answers through a scripted
deployment (the WhatsApp channel tests and the inbound job tests import them into their ``conftest.py``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession
from switchboard.db.models import ChannelAccount, Tenant
from switchboard.settings import Settings
from switchboard.standins.offline_server import DeploymentScript

from tests.utils.agent import answer_with_script
from tests.utils.whatsapp import connect_whatsapp

__all__ = ["WaTenant", "ai_tenant", "script", "wa_tenant"]


@dataclass
class WaTenant:
    tenant: Tenant
    account: ChannelAccount
    phone_number_id: str


@pytest.fixture
async def wa_tenant(
    make_tenant: Callable[..., Awaitable[Tenant]],
    sessions: async_sessionmaker[AsyncSession],
    settings: Settings,
) -> WaTenant:
    """A fresh tenant with a WhatsApp number of its own."""
    tenant = await make_tenant()
    account = await connect_whatsapp(sessions, tenant, settings)
    return WaTenant(tenant=tenant, account=account, phone_number_id=account.external_account_id)


@pytest.fixture
async def ai_tenant(wa_tenant, model, sessions, offline_model):  # type: ignore[no-untyped-def]
    """``wa_tenant`` whose agent answers through the ``model`` fixture's scripted deployment."""
    await answer_with_script(sessions, wa_tenant.tenant.id, offline_model, name=model[1])
    return wa_tenant


@pytest.fixture
def script(wa_tenant, sessions, offline_model) -> Callable[..., Awaitable[DeploymentScript]]:  # type: ignore[no-untyped-def]
    """``model = await script(**sections)``: ``wa_tenant`` answers through a scripted deployment of its
    own, with these other settings sections (``handoff={...}``...)."""

    async def configure(**sections) -> DeploymentScript:  # type: ignore[no-untyped-def]
        return await answer_with_script(sessions, wa_tenant.tenant.id, offline_model, **sections)

    return configure
