"""``switchboard channel add-instagram`` and ``switchboard simulate instagram`` against the real service."""

from __future__ import annotations

import uuid

import httpx
from sqlmodel import select
from switchboard.channels.accounts import access_token_of
from switchboard.channels.instagram.cli import SAMPLE_MEDIA, SIMULATED_IGSID, refresh_mids, retarget_payload
from switchboard.crypto import CredentialCipher
from switchboard.db.models import ChannelAccount, Message

from services.instagram.main import create_app
from tests.utils.instagram import IG_APP_SECRET, connect_instagram, load_payload, mid, payload_path
from tests.utils.net import free_port
from tests.utils.servers import serve_app


async def test_add_instagram_token_is_encrypted_at_rest(cli, settings, sessions) -> None:  # type: ignore[no-untyped-def]
    slug = f"cli-{uuid.uuid4().hex[:8]}"
    account_id = "17841" + str(uuid.uuid4().int)[:12]
    assert (await cli.arun("tenant", "create", "--slug", slug, "--name", "CLI Shop")).exit_code == 0
    out = await cli.arun(
        "channel",
        "add-instagram",
        "--tenant",
        slug,
        "--account-id",
        account_id,
        "--access-token",
        "IGAA-secret",
    )
    assert out.exit_code == 0, out.output
    assert f"connected instagram account {account_id}" in out.output and "/webhooks/instagram" in out.output
    assert (
        await cli.arun("channel", "add-instagram", "--tenant", slug, "--account-id", "@shop")
    ).exit_code == 2
    async with sessions() as session:
        account = (
            await session.exec(select(ChannelAccount).where(ChannelAccount.external_account_id == account_id))
        ).one()
    assert account.channel == "instagram" and "IGAA-secret" not in account.credentials_encrypted
    cipher = CredentialCipher(settings.secret("encryption_key").encode())
    assert access_token_of(account, cipher) == "IGAA-secret"


def test_retarget_and_refresh_keep_references_to_earlier_messages() -> None:
    moved = refresh_mids(retarget_payload(load_payload("message_echo.json", refresh=False), account_id="42"))
    item = moved["entry"][0]["messaging"][0]
    assert (moved["entry"][0]["id"], item["sender"]["id"], item["recipient"]["id"]) == (
        "42",
        "42",
        "1000000000000001",
    )
    assert item["message"]["mid"].startswith(mid(6)) and item["message"]["mid"] != mid(6)
    seen = refresh_mids(load_payload("messaging_seen.json", refresh=False))
    assert seen["entry"][0]["messaging"][0]["read"]["mid"] == mid(6)  # a reference: kept


async def test_simulate_payload_serves_sample_media_and_says_when_nothing_is_answered(
    make_settings, make_tenant, sessions, cli, stops_at_the_queue
) -> None:  # type: ignore[no-untyped-def]
    port = free_port()
    # the service with its own sandbox and an account on it, as `make run` has the demo's
    settings = make_settings(
        instagram_port=port, instagram_graph_base_url=None, instagram_sandbox_enabled=True
    )
    tenant = await make_tenant()
    await connect_instagram(sessions, tenant, settings, api_base_url="sandbox")
    env = {"INSTAGRAM_APP_SECRET": IG_APP_SECRET, "INSTAGRAM_PORT": str(port), "INSTAGRAM_GRAPH_BASE_URL": ""}
    async with serve_app(create_app(settings), port=port):
        image = await cli.arun(
            "simulate",
            "instagram",
            "--tenant",
            tenant.slug,
            "--payload",
            str(payload_path("image_attachment.json")),
            "--timeout",
            "0.3",
            **env,
        )
        seen = await cli.arun(
            "simulate",
            "instagram",
            "--tenant",
            tenant.slug,
            "--payload",
            str(payload_path("messaging_seen.json")),
            **env,
        )
        async with sessions() as session:
            (row,) = (await session.exec(select(Message).where(Message.tenant_id == tenant.id))).all()
        # --text without --from: the simulated customer's
        text = await cli.arun(
            "simulate", "instagram", "--tenant", tenant.slug, "--text", "hi", "--timeout", "0.3", **env
        )
        async with sessions() as session:
            (texted,) = (
                await session.exec(
                    select(Message).where(Message.tenant_id == tenant.id, Message.id != row.id)
                )
            ).all()
        sender = load_payload("image_attachment.json")["entry"][0]["messaging"][0]["sender"]["id"]
        async with httpx.AsyncClient() as client:
            served = await client.get(row.media[0]["ref"])
            # the profile the worker will look up (the sandbox answers error 100 for an unknown IGSID)
            profile = await client.get(
                f"http://127.0.0.1:{port}/_sandbox/instagram/v21.0/{sender}",
                headers={"Authorization": "Bearer x"},
            )
    assert image.exit_code == 0 and '"stored":1' in image.stderr, image.output
    assert row.external_id.startswith(mid(2)) and row.media[0]["ref"].startswith(
        f"http://127.0.0.1:{port}/_sandbox/instagram/_cdn/"
    )
    assert served.content == SAMPLE_MEDIA["image"]
    assert profile.json() == {
        "name": f"Sandbox Customer {sender[-4:]}",
        "username": f"sandbox.customer.{sender[-4:]}",
        "id": sender,
    }
    assert seen.exit_code == 0 and "holds no customer message to answer" in seen.stderr
    assert text.exit_code == 0 and '"stored":1' in text.stderr, text.output
    assert (texted.text, texted.sender_external_id) == ("hi", SIMULATED_IGSID)
