"""Instagram tests: a tenant whose agent answers from a scripted offline model, with an Instagram account
of its own, the Instagram service app behind a client, and the sandbox (and its CDN) of the session."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from switchboard.db.models import ChannelAccount, Tenant

from tests.utils.agent import answer_with_script
from tests.utils.instagram import connect_instagram, instagram_service, signed


@dataclass
class IgScene:
    tenant: Tenant
    account: ChannelAccount
    settings: Any
    sandbox: Any
    """The :class:`~switchboard.standins.instagram.InstagramSandbox` state."""
    sandbox_url: str
    script: Any
    """The tenant's scripted deployment (``push``/``default``/``requests``)."""

    @property
    def account_id(self) -> str:
        return self.account.external_account_id

    async def post(self, *bodies: dict[str, Any]) -> list[httpx.Response]:
        """Post each body, signed with the Instagram app's secret, to the Instagram service."""
        out = []
        async with instagram_service(self.settings) as client:
            for body in bodies:
                raw, headers = signed(body)
                out.append(await client.post("/webhooks/instagram", content=raw, headers=headers))
        return out

    def sent(self) -> list[dict[str, Any]]:
        return self.sandbox.sent_by(self.account_id)

    async def cdn(self, asset: str, data: bytes) -> str:
        """Serve ``data`` at the sandbox CDN; returns its URL."""
        async with httpx.AsyncClient() as client:
            answer = await client.put(f"{self.sandbox_url}/_control/cdn/{asset}", content=data)
        return answer.json()["url"]

    async def expire(self, asset: str) -> None:
        async with httpx.AsyncClient() as client:
            await client.delete(f"{self.sandbox_url}/_control/cdn/{asset}")


@pytest.fixture
async def ig(e2e_settings, make_tenant, sessions, offline_model, instagram_sandbox):  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    script = await answer_with_script(sessions, tenant.id, offline_model)
    settings = e2e_settings()
    account = await connect_instagram(sessions, tenant, settings)
    return IgScene(tenant, account, settings, instagram_sandbox[1], instagram_sandbox[0], script)
