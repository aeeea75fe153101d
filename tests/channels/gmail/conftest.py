"""Gmail tests: a tenant answering through a scripted model, with a mailbox of its own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.utils.agent import answer_with_script
from tests.utils.gmail import connect_gmail


@dataclass
class Scene:
    tenant: Any
    settings: Any
    mailbox: str
    account_id: Any
    script: Any


@pytest.fixture
async def scene(e2e_settings, make_tenant, sessions, model, offline_model):  # type: ignore[no-untyped-def]
    """A tenant whose agent answers from the offline model's script, a connected sandbox mailbox."""
    tenant = await make_tenant()
    script = await answer_with_script(sessions, tenant.id, offline_model, name=model[1])
    settings = e2e_settings()
    connected = await connect_gmail(sessions, tenant, settings)
    return Scene(
        tenant=tenant,
        settings=settings,
        mailbox=connected.email,
        account_id=connected.account_id,
        script=script,
    )
