"""The console names channels the way their registered class declares (a fourth channel included)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from switchboard.channels.base import register_channel, unregister_channel
from switchboard.db.models import Role

from tests.channels.test_registry import SmsChannel
from tests.utils.console import log_in, new_user


@pytest.fixture
def sms() -> Iterator[type[SmsChannel]]:
    register_channel("sms", SmsChannel)
    try:
        yield SmsChannel
    finally:
        unregister_channel("sms")


async def test_the_console_labels_come_from_the_registered_class(
    sms: type[SmsChannel],
    console_client,
    sessions,
    make_tenant,
) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with console_client() as client:
        await log_in(client, admin)
        inbox = await client.get(f"/t/{tenant.slug}/inbox?channel=sms")
        channels = await client.get(f"/t/{tenant.slug}/channels")
    assert inbox.status_code == 200
    assert '<option value="sms" selected>SMS Text</option>' in inbox.text
    assert '<option value="whatsapp" >WhatsApp</option>' in inbox.text
    assert channels.status_code == 200
    assert "<h2>SMS Text</h2>" in channels.text and 'data-channel="sms"' in channels.text
