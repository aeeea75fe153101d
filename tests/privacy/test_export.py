"""Exporting a customer: a ZIP whose customer.json holds every message and whose media files are theirs;
the command line erases and exports by any identity, after the identity is typed again."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

from sqlalchemy import text
from switchboard.media.store import MediaStore
from switchboard.privacy.export import (
    EXPORT_FORMAT,
    export_customer,
    export_key,
    export_link,
    export_link_is_valid,
)

from tests.privacy.seed import seed_customer


def _unzip(data: bytes) -> tuple[dict, dict[str, bytes]]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    return json.loads(files.pop("customer.json")), files


async def test_the_export_holds_every_message_and_media_file(sessions, make_tenant, settings) -> None:
    store = MediaStore.from_settings(settings)
    tenant = await make_tenant()
    ana = await seed_customer(sessions, tenant.id, store, "ana")
    bea = await seed_customer(sessions, tenant.id, store, "bea")

    document, files = _unzip(
        await export_customer(sessions, tenant_id=tenant.id, customer_id=ana.customer_id, store=store)
    )

    assert document["format"] == EXPORT_FORMAT
    assert document["customer"]["phone"] == ana.phone and document["customer"]["email"] == ana.email
    assert {(i["kind"], i["value"]) for i in document["identities"]} == {
        ("wa_id", ana.phone),
        ("email", ana.email),
    }
    messages = [m for c in document["conversations"] for m in c["messages"]]
    assert sorted(m["text"] for m in messages) == sorted(ana.texts)
    assert sorted(m["id"] for m in messages) == sorted(str(i) for i in ana.message_ids)
    assert document["memory"]["facts"] == {"phone": ana.phone}
    assert [lead["interest"] for lead in document["leads"]] == ["kettle"]
    [photo] = [item for m in messages for item in m["media"]]
    assert files[photo["file"]] == await store.get(ana.media_refs[0]) and "ref" not in photo
    assert bea.phone not in json.dumps(document) and len(files) == 1


def test_an_export_link_expires_and_opens_only_its_own_file(settings) -> None:
    tenant_id = __import__("uuid").uuid4()
    key = export_key(tenant_id, "ab" * 16)
    link = export_link(
        settings, tenant_id, "ab" * 16, base_url="https://console.example.org/customers/exports", now=1000.0
    )
    assert link.startswith(f"https://console.example.org/customers/exports/{'ab' * 16}.zip?exp=")
    exp, sig = (part.split("=", 1)[1] for part in link.split("?", 1)[1].split("&"))
    assert export_link_is_valid(settings, key, int(exp), sig, now=1000.0 + 60)
    assert not export_link_is_valid(
        settings, key, int(exp), sig, now=1000.0 + settings.customer_export_link_ttl_s + 1
    )
    assert not export_link_is_valid(settings, key.replace("ab", "cd", 1), int(exp), sig, now=1000.0)
    from switchboard.media.links import link_is_valid

    assert not link_is_valid(settings, key, int(exp), sig, now=1000.0)  # a media link it is not


async def test_the_command_line_exports_and_erases_after_the_identity_is_typed_again(
    sessions, make_tenant, settings, cli, tmp_path: Path
) -> None:
    store = MediaStore.from_settings(settings)
    tenant = await make_tenant()
    ana = await seed_customer(sessions, tenant.id, store, "ana")
    out = tmp_path / "ana.zip"

    exported = await cli.arun("customers", "export", "-t", tenant.slug, "+" + ana.phone, "--out", str(out))
    assert exported.exit_code == 0, exported.output
    document, _ = _unzip(out.read_bytes())
    assert sorted(m["text"] for c in document["conversations"] for m in c["messages"]) == sorted(ana.texts)
    assert [o["order_number"] for o in document["orders"]] == [f"ana-{ana.phone[2:]}"]
    async with sessions() as session:
        audited = (
            await session.exec(
                text("SELECT actor FROM audit_logs WHERE action = 'customer_exported' AND target_id = :c"),
                params={"c": str(ana.customer_id)},
            )
        ).all()
    assert [tuple(a) for a in audited] == [("cli",)]

    refused = await cli.arun("customers", "erase", "-t", tenant.slug, ana.email, input="someone@else.org\n")
    assert refused.exit_code != 0 and "nothing was erased" in refused.output
    erased = await cli.arun("customers", "erase", "-t", tenant.slug, ana.email, "--confirm", ana.email)
    assert erased.exit_code == 0, erased.output
    assert f"erased customer {ana.customer_id}" in erased.stdout
    async with sessions() as session:
        row = (
            await session.exec(
                text("SELECT external_user_id, phone FROM customers WHERE id = :c"),
                params={"c": ana.customer_id},
            )
        ).one()
    assert tuple(row) == (f"erased:{ana.customer_id}", None)
    missing = await cli.arun("customers", "erase", "-t", tenant.slug, ana.email, "--confirm", ana.email)
    assert missing.exit_code != 0 and "no customer" in missing.output
