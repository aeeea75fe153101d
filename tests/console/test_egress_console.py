"""The console without the operator's loopback allowance: "Test this deployment" on an internal address
reaches nothing and says the policy refused it; the channel form takes no API address."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from sqlmodel import select
from switchboard.db.models import ChannelAccount, Role, Tenant

from tests.test_egress import listening
from tests.utils.console import log_in, new_user
from tests.utils.whatsapp import new_phone_number_id


@pytest.fixture
def console_settings(make_settings: Any) -> Any:
    """Production-like: no loopback allowance (overrides the console tests' settings)."""
    return make_settings(egress_allow_loopback=False)


async def test_test_this_deployment_on_an_internal_address_reaches_nothing(
    console_client, sessions, make_tenant
):  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    with listening() as listener:
        async with sessions() as session, session.begin():
            row = await session.get(Tenant, tenant.id)
            llm = {
                "deployments": [
                    {
                        "id": "mine",
                        "provider": "openai_compatible",
                        "model": "m",
                        "api_base": listener.url.replace("127.0.0.1", "[::ffff:127.0.0.1]") + "/v1",
                    }
                ]
            }
            row.settings_extensions = {**(row.settings_extensions or {}), "llm": llm}
            session.add(row)
        async with console_client() as client:
            me = await log_in(client, admin)
            answer = await me.post_form(f"/t/{tenant.slug}/settings/deployments/mine/test")
        assert answer.status_code == 200
        assert "the address policy refused ::ffff:127.0.0.1: it is a loopback address" in answer.text
        assert "secret" not in answer.text and "refused connection" not in answer.text.lower()
        assert listener.requests == []


async def test_the_channel_form_refuses_an_api_address(console_client, sessions, make_tenant):  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    number = new_phone_number_id()
    with listening() as listener:
        async with console_client() as client:
            me = await log_in(client, admin)
            for base in (listener.url, "https://graph.example.com", "http://169.254.169.254"):
                refused = await me.post_form(
                    f"/t/{tenant.slug}/channels/whatsapp",
                    {"account_id": number, "access_token": f"EAAG-{uuid.uuid4().hex}", "api_base": base},
                )
                assert refused.status_code == 422
                assert "another API address can only be set by the platform" in refused.text
        assert listener.requests == []
    async with sessions() as session:
        rows = (await session.exec(select(ChannelAccount).where(ChannelAccount.tenant_id == tenant.id))).all()
    assert rows == []
