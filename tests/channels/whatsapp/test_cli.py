"""``switchboard channel add-whatsapp`` and the simulate helpers."""

from __future__ import annotations

import uuid

from sqlmodel import select
from switchboard.channels.whatsapp.accounts import access_token_of
from switchboard.channels.whatsapp.cli import retarget_payload
from switchboard.cli import app
from switchboard.crypto import CredentialCipher
from switchboard.db.models import ChannelAccount
from typer.testing import CliRunner

from tests.utils.whatsapp import load_payload


async def test_add_whatsapp_token_is_encrypted_at_rest(database_url, data_dir, settings, sessions) -> None:  # type: ignore[no-untyped-def]
    import asyncio

    slug = f"cli-{uuid.uuid4().hex[:8]}"
    env = {"DATABASE_URL": database_url, "DATA_DIR": str(data_dir / "state")}
    runner = CliRunner()
    pid = str(uuid.uuid4().int)[:15]

    def invoke() -> None:
        assert (
            runner.invoke(app, ["tenant", "create", "--slug", slug, "--name", "CLI Shop"], env=env).exit_code
            == 0
        )
        out = runner.invoke(
            app,
            [
                "channel",
                "add-whatsapp",
                "--tenant",
                slug,
                "--phone-number-id",
                pid,
                "--access-token",
                "EAAG-secret",
            ],
            env=env,
        )
        assert out.exit_code == 0, out.output
        assert f"connected whatsapp number {pid}" in out.output and "/webhooks/whatsapp" in out.output
        bad = runner.invoke(
            app, ["channel", "add-whatsapp", "--tenant", slug, "--phone-number-id", "abc"], env=env
        )
        assert bad.exit_code == 2

    await asyncio.to_thread(invoke)
    async with sessions() as session:
        account = (
            await session.exec(select(ChannelAccount).where(ChannelAccount.external_account_id == pid))
        ).one()
    assert "EAAG-secret" not in account.credentials_encrypted
    assert access_token_of(account, CredentialCipher(settings.resolved_encryption_key())) == "EAAG-secret"


def test_retarget_payload_sets_account_and_refreshes_timestamps() -> None:
    body = load_payload("batch_multiple_messages_and_status.json", refresh=False)
    moved = retarget_payload(body, phone_number_id="123")
    values = [c["value"] for e in moved["entry"] for c in e["changes"]]
    assert {v["metadata"]["phone_number_id"] for v in values} == {"123"}
    stamps = [int(m["timestamp"]) for v in values for m in v.get("messages", []) + v.get("statuses", [])]
    assert max(stamps) - min(stamps) == 1781000782 - 1781000779 and min(stamps) > 1781000782
    kept = retarget_payload(body, phone_number_id="123", keep_timestamps=True)
    assert kept["entry"][1]["changes"][0]["value"]["statuses"][0]["timestamp"] == "1781000782"
