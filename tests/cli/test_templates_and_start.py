"""``switchboard templates list|refresh`` and ``switchboard conversations start`` against the Graph
sandbox and the session's database."""

from __future__ import annotations

import random

from sqlmodel import select
from switchboard.db.models import Outbox

from tests.utils.handoff import random_phone
from tests.utils.whatsapp_fixtures import wa_tenant

__all__ = ["wa_tenant"]


async def test_refresh_list_and_start_from_the_command_line(cli, wa_tenant, graph_sandbox, sessions) -> None:  # type: ignore[no-untyped-def]
    slug, graph = wa_tenant.tenant.slug, {"WHATSAPP_GRAPH_BASE_URL": graph_sandbox[0]}
    empty = await cli.arun("templates", "list", "--tenant", slug)
    assert empty.exit_code == 0 and "no templates stored" in empty.stdout
    missing = await cli.arun("templates", "refresh", "--tenant", slug, **graph)
    assert missing.exit_code == 2 and "name the WhatsApp Business Account id" in missing.stderr

    refreshed = await cli.arun(
        "templates",
        "refresh",
        "--tenant",
        slug,
        "--waba-id",
        str(random.randint(10**14, 10**15 - 1)),
        **graph,
    )
    assert refreshed.exit_code == 0, refreshed.stderr
    assert refreshed.stdout.strip() == "5 templates stored, 4 approved"
    listed = (await cli.arun("templates", "list", "--tenant", slug)).stdout.splitlines()
    assert listed[0].split() == ["NAME", "LANGUAGE", "STATUS", "CATEGORY", "VALUES"]
    assert [line.split()[:3] for line in listed[1:]] == [
        ["hello_world", "en_US", "APPROVED"],
        ["order_update", "en_US", "APPROVED"],
        ["order_update", "es", "APPROVED"],
        ["shipping_label", "en_US", "APPROVED"],
        ["spring_sale", "en_US", "PENDING"],
    ]
    assert listed[2].endswith("body 3, buttons 1") and listed[4].endswith("body 2, header document")

    phone = random_phone()
    text = await cli.arun("conversations", "start", "--tenant", slug, "--phone", "+" + phone, "--text", "Hi")
    assert text.exit_code == 2 and "only within 24 hours of the customer's last message" in text.stderr
    started = await cli.arun(
        "conversations",
        "start",
        "--tenant",
        slug,
        "--phone",
        "+" + phone,
        "--template",
        "order_update",
        "--language",
        "es",
        "--value",
        "Ana",
        "--value",
        "#1042",
        "--value",
        "en camino",
        "--button",
        "1042",
    )
    assert started.exit_code == 0, started.stderr
    assert (
        started.stdout.startswith("queued (template) in conversation ")
        and "with a new customer" in started.stdout
    )
    async with sessions() as session:
        [row] = (await session.exec(select(Outbox).where(Outbox.tenant_id == wa_tenant.tenant.id))).all()
    assert (row.recipient, row.payload["template"]["language"], row.payload["proxy"]["sender"]) == (
        phone,
        "es",
        "cli",
    )


async def test_a_standard_webhooks_endpoint_and_its_secret_rotated_from_the_command_line(
    cli, make_tenant, settings, sessions
) -> None:  # type: ignore[no-untyped-def]
    from switchboard.crypto import CredentialCipher
    from switchboard.db.models import WebhookEndpoint
    from switchboard.events.endpoints import signing_secrets

    slug = (await make_tenant()).slug
    added = await cli.arun(
        "webhooks", "add", "--tenant", slug, "--url", "https://127.0.0.1/hook", "--signature", "standard"
    )
    assert added.exit_code == 0, added.stderr
    endpoint_id = added.stdout.split()[2]
    old = added.stdout.split("(shown once): ")[1].strip()
    rotated = await cli.arun("webhooks", "rotate-secret", "--tenant", slug, endpoint_id, "--overlap", "600")
    assert rotated.exit_code == 0, rotated.stderr
    new = rotated.stdout.split("(shown once): ")[1].splitlines()[0].strip()
    assert "the previous secret signs too until" in rotated.stdout
    async with sessions() as session:
        row = await session.get(WebhookEndpoint, __import__("uuid").UUID(endpoint_id))
    assert row.signature_scheme == "standard"
    assert signing_secrets(row, CredentialCipher(settings.secret("encryption_key").encode())) == [new, old]
    unknown = await cli.arun("webhooks", "rotate-secret", "--tenant", slug, "not-an-id")
    assert unknown.exit_code == 2 and "no endpoint not-an-id of this tenant" in unknown.stderr
