"""``switchboard api-keys create|list|revoke`` and the list commands' ``-o table|json|csv`` and ``-q``."""

from __future__ import annotations

import csv
import io
import json
import re

from tests.utils.agent import make_conversation


async def test_create_list_and_revoke_a_key_from_the_command_line(cli, make_tenant, api) -> None:
    shop = await make_tenant("Cli Key Shop")
    created = await cli.arun(
        "api-keys",
        "create",
        "-t",
        shop.slug,
        "-s",
        "leads:read",
        "-s",
        "conversations:read",
        "--name",
        "shop backend",
        "--expires-in-days",
        "30",
    )
    assert created.exit_code == 0, created.output
    key = re.search(r"key: (sbk_\S+)", created.output).group(1)  # type: ignore[union-attr]
    key_id = re.search(r"created key (\S+)", created.output).group(1)  # type: ignore[union-attr]
    assert "conversations:read, leads:read" in created.output and "expires" in created.output
    async with api(key) as client:
        assert (await client.get("/api/v1/leads")).status_code == 200

    as_json = await cli.arun("api-keys", "list", "-t", shop.slug, "-o", "json")
    assert as_json.exit_code == 0, as_json.output
    [row] = json.loads(as_json.output)
    assert (row["id"], row["name"], row["kind"], row["state"]) == (key_id, "shop backend", "key", "active")
    assert row["scopes"] == ["conversations:read", "leads:read"] and row["prefix"] == key[:12]
    assert row["last_used_at"] is not None and key not in as_json.output
    as_csv = await cli.arun("api-keys", "list", "-t", shop.slug, "-o", "csv")
    [parsed] = list(csv.DictReader(io.StringIO(as_csv.output)))
    assert parsed["id"] == key_id and parsed["scopes"] == "conversations:read,leads:read"
    table = await cli.arun("api-keys", "list", "-t", shop.slug)
    assert table.output.splitlines()[0].split()[:3] == ["ID", "KIND", "NAME"] and key_id in table.output
    assert (await cli.arun("api-keys", "list", "-t", shop.slug, "-q")).output.split() == [key_id]

    revoked = await cli.arun("api-keys", "revoke", "-t", shop.slug, key_id)
    assert revoked.exit_code == 0 and f"revoked key {key_id}" in revoked.output
    async with api(key) as client:
        assert (await client.get("/api/v1/leads")).status_code == 401
    assert (await cli.arun("api-keys", "list", "-t", shop.slug, "-q")).output.split() == []
    everything = json.loads(
        (await cli.arun("api-keys", "list", "-t", shop.slug, "--all", "-o", "json")).output
    )
    assert [r["state"] for r in everything] == ["revoked"]


async def test_an_unknown_scope_or_key_is_refused_in_words(cli, make_tenant) -> None:
    shop = await make_tenant("Cli Refusal Shop")
    unknown = await cli.arun("api-keys", "create", "-t", shop.slug, "-s", "everything:write")
    assert unknown.exit_code == 2 and "unknown scope 'everything:write'" in unknown.output
    missing = await cli.arun("api-keys", "revoke", "-t", shop.slug, "00000000-0000-0000-0000-000000000000")
    assert missing.exit_code == 2 and "no API key or token" in missing.output


async def test_other_list_commands_print_json_csv_and_ids(cli, make_tenant, sessions) -> None:
    shop = await make_tenant("Cli Output Shop")
    tenants = json.loads((await cli.arun("tenant", "list", "-o", "json")).output)
    assert {"id": str(shop.id), "slug": shop.slug, "name": "Cli Output Shop"}.items() <= next(
        t for t in tenants if t["slug"] == shop.slug
    ).items()
    assert str(shop.id) in (await cli.arun("tenant", "list", "-q")).output.split()
    handle = await make_conversation(sessions, shop)
    conversations = await cli.arun("conversations", "list", "-t", shop.slug, "-o", "json")
    assert conversations.exit_code == 0, conversations.output
    assert [(c["id"], c["channel"], c["mode"]) for c in json.loads(conversations.output)] == [
        (str(handle.conversation.id), "whatsapp", "ai")
    ]
    assert (await cli.arun("conversations", "list", "-t", shop.slug, "--quiet")).output.split() == [
        str(handle.conversation.id)
    ]
    tools = json.loads((await cli.arun("tools", "list", "-t", shop.slug, "-o", "json")).output)
    names = (await cli.arun("tools", "list", "-t", shop.slug, "-q")).output.split()
    assert names == [t["tool_name"] for t in tools] and names and {"enabled", "kind"} <= set(tools[0])
    for command in (
        ["leads", "list"],
        ["webhooks", "list"],
        ["users", "list"],
        ["agents", "list"],
        ["kb", "list"],
    ):
        result = await cli.arun(*command, "-t", shop.slug, "-o", "csv")
        assert result.exit_code == 0, (command, result.output)
        assert result.output.splitlines()[0].startswith("id,"), command
        assert (await cli.arun(*command, "-t", shop.slug, "-q")).output == "", command
