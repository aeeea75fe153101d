"""The demo tenant ``make run`` seeds into an empty database, so the system can be tried at once.

Its channel accounts use the fake identities of ``shared/payloads`` (WhatsApp ``phone_number_id``
``106000000000001``, Instagram ``17841400000000001``, mailbox ``support@example.com``), so the real
payloads can be replayed against a fresh ``make run``.
"""

from __future__ import annotations

from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import Tenant
from switchboard.tenants import add_channel_account, count_tenants, create_tenant

__all__ = ["seed_demo_if_empty", "DEMO_SLUG", "DEMO_WHATSAPP_PHONE_NUMBER_ID"]

DEMO_SLUG = "demo"
DEMO_WHATSAPP_PHONE_NUMBER_ID = "106000000000001"
DEMO_INSTAGRAM_ACCOUNT_ID = "17841400000000001"
DEMO_MAILBOX = "support@example.com"


async def seed_demo_if_empty(session: AsyncSession) -> Tenant | None:
    """Create the ``demo`` tenant with its channel accounts when no tenant exists.

    Returns:
        The new tenant, or ``None`` when the database already had tenants (nothing is changed).
    """
    if await count_tenants(session) > 0:
        return None
    tenant = await create_tenant(
        session, slug=DEMO_SLUG, name="Demo Shop", organization_name="Demo Organization"
    )
    tenant.settings_extensions = {
        "agent": {
            "name": "Sam",
            "instructions": "You are Sam, the friendly support agent of Demo Shop. Answer briefly and only from "
            "what the tools return; when unsure, say so and offer a human.",
        }
    }
    await add_channel_account(
        session, tenant=tenant, channel="whatsapp", external_account_id=DEMO_WHATSAPP_PHONE_NUMBER_ID,
        display_name="Demo Shop WhatsApp (+1 555-0100-001)",
    )  # fmt: skip
    await add_channel_account(
        session, tenant=tenant, channel="instagram", external_account_id=DEMO_INSTAGRAM_ACCOUNT_ID,
        display_name="Demo Shop Instagram",
    )  # fmt: skip
    await add_channel_account(
        session,
        tenant=tenant,
        channel="gmail",
        external_account_id=DEMO_MAILBOX,
        display_name="Demo Shop support mailbox",
    )
    await session.flush()
    return tenant
