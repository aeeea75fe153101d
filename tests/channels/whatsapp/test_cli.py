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
        empty = runner.invoke(
            app,
            ["channel", "add-whatsapp", "--tenant", slug, "--phone-number-id", pid, "--access-token", ""],
            env=env,
        )
        assert empty.exit_code == 2 and empty.stderr.startswith("error: --access-token is empty")

    await asyncio.to_thread(invoke)
    async with sessions() as session:
        account = (
            await session.exec(select(ChannelAccount).where(ChannelAccount.external_account_id == pid))
        ).one()
    assert "EAAG-secret" not in account.credentials_encrypted
    assert (
        access_token_of(account, CredentialCipher(settings.secret("encryption_key").encode()))
        == "EAAG-secret"
    )


def test_retarget_payload_sets_account_and_refreshes_timestamps() -> None:
    body = load_payload("batch_multiple_messages_and_status.json", refresh=False)
    moved = retarget_payload(body, phone_number_id="123")
    values = [c["value"] for e in moved["entry"] for c in e["changes"]]
    assert {v["metadata"]["phone_number_id"] for v in values} == {"123"}
    stamps = [int(m["timestamp"]) for v in values for m in v.get("messages", []) + v.get("statuses", [])]
    assert max(stamps) - min(stamps) == 1781000782 - 1781000779 and min(stamps) > 1781000782
    kept = retarget_payload(body, phone_number_id="123", keep_timestamps=True)
    assert kept["entry"][1]["changes"][0]["value"]["statuses"][0]["timestamp"] == "1781000782"


async def test_simulate_payload_twice_gets_fresh_ids_and_unanswerable_posts_return_at_once(
    make_settings, wa_tenant, sessions, graph_sandbox
) -> None:  # type: ignore[no-untyped-def]
    import asyncio
    import time

    from switchboard.db.models import Message

    from services.whatsapp.main import create_app
    from tests.utils.asgi_server import serve_asgi
    from tests.utils.net import free_port
    from tests.utils.whatsapp import payload_path

    port = free_port()
    settings = make_settings(whatsapp_port=port)
    env = {
        "DATABASE_URL": settings.database_url,
        "REDIS_URL": settings.redis_url,
        "DATA_DIR": str(settings.data_dir),
        "META_APP_SECRET": "test-app-secret",
        "WHATSAPP_PORT": str(port),
        "WHATSAPP_GRAPH_BASE_URL": graph_sandbox[0],
        "LOG_LEVEL": "WARNING",
    }
    runner = CliRunner()
    slug = wa_tenant.tenant.slug

    async def simulate(name: str, *extra: str, wait: str = "20"):  # type: ignore[no-untyped-def]
        args = ["simulate", "whatsapp", "--tenant", slug, "--payload", str(payload_path(name)), *extra]
        started = time.monotonic()
        out = await asyncio.to_thread(runner.invoke, app, [*args, "--timeout", wait], env=env)
        return out, time.monotonic() - started

    async with serve_asgi(create_app(settings), port=port):
        fresh = [await simulate("text.json", wait="0.3") for _ in range(2)]  # no worker: no reply
        for out, _ in fresh:
            assert out.exit_code == 0, out.output
            assert '"stored":1,"duplicates":0' in out.stderr
        again, _ = await simulate("text.json", "--keep-ids", wait="0.3")
        again_too, seconds = await simulate("text.json", "--keep-ids")
        status, status_seconds = await simulate("status_read.json")

    assert again.exit_code == 0 and '"stored":1' in again.stderr  # the original id: new to this tenant
    assert again_too.exit_code == 0 and '"stored":0,"duplicates":1' in again_too.stderr and seconds < 10
    assert (
        "nothing new stored (1 duplicate(s): already received): no reply will come "
        "(drop --keep-ids to post fresh message ids)" in again_too.stderr
    )
    assert status.exit_code == 0 and status_seconds < 10
    assert "holds no customer message to answer" in status.stderr
    async with sessions() as session:
        ids = (
            await session.exec(select(Message.external_id).where(Message.tenant_id == wa_tenant.tenant.id))
        ).all()
    original = load_payload("text.json", refresh=False)["entry"][0]["changes"][0]["value"]["messages"][0][
        "id"
    ]
    assert len(ids) == 3 and len(set(ids)) == 3 and original in ids
    assert all(i.startswith(original) for i in ids)


async def test_simulate_and_add_whatsapp_find_the_running_system_through_run_json(
    make_settings, wa_tenant, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    """Another terminal without WHATSAPP_PORT still reaches the services `switchboard run` started."""
    import asyncio
    import json
    import os

    from services.whatsapp.main import create_app
    from tests.utils.asgi_server import serve_asgi
    from tests.utils.net import free_port

    port = free_port()
    settings = make_settings(whatsapp_port=port)
    data_dir = tmp_path / "run-data"
    data_dir.mkdir()
    # what `switchboard run` records: its (live) pid and the ports it started services on
    (data_dir / "run.json").write_text(
        json.dumps({"pid": os.getpid(), "network": {"host": "127.0.0.1", "whatsapp_port": port}})
    )
    env = {
        "DATABASE_URL": settings.database_url,
        "REDIS_URL": settings.redis_url,
        "DATA_DIR": str(data_dir),
        "META_APP_SECRET": "test-app-secret",
        "LOG_LEVEL": "WARNING",
    }
    runner = CliRunner()
    slug = wa_tenant.tenant.slug
    async with serve_asgi(create_app(settings), port=port):
        posted = await asyncio.to_thread(
            runner.invoke,
            app,
            ["simulate", "whatsapp", "--tenant", slug, "--text", "hi", "--timeout", "0.3"],
            env=env,
        )
    assert posted.exit_code == 0, posted.output
    assert '"stored":1' in posted.stderr
    pid = str(uuid.uuid4().int)[:15]
    added = await asyncio.to_thread(
        runner.invoke, app, ["channel", "add-whatsapp", "--tenant", slug, "--phone-number-id", pid], env=env
    )
    assert added.exit_code == 0, added.output
    assert f"locally http://127.0.0.1:{port}/webhooks/whatsapp" in added.stdout
