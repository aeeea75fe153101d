"""The Gmail sandbox of ``switchboard run`` keeps its state in ``DATA_DIR`` across a restart of the Gmail
service: the mailbox stays connected (its refresh token still works) and new mail gets new ids, so the
demo keeps answering (before, the worker logged ``gmail_mailbox_needs_reauth`` after a restart, and a
reconnected mailbox's reused ids were skipped as duplicates)."""

from __future__ import annotations

from typing import Any

import httpx
from sqlmodel import select
from switchboard.db.models import GmailMailbox
from switchboard.standins.gmail import GmailSandbox
from switchboard.standins.offline_server import ScriptedResponse

from services.gmail.main import create_app
from tests.utils.agent import answer_with_script
from tests.utils.gmail import connect_gmail, new_customer, run_sync
from tests.utils.net import free_port
from tests.utils.servers import serve_app


async def _control(settings, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    headers = {"Authorization": f"Bearer {settings.secret('admin_token')}"}
    url = settings.resolved_gmail_api_base_url + "/_control/" + path
    async with httpx.AsyncClient(timeout=20.0, headers=headers) as client:
        response = await (client.post(url, json=body) if body is not None else client.get(url))
    response.raise_for_status()
    return response.json()


async def test_the_service_sandbox_keeps_tokens_and_ids_across_a_restart(
    e2e_settings, make_tenant, sessions, model, offline_model, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    script = await answer_with_script(sessions, tenant.id, offline_model, name=model[1])
    script.default = ScriptedResponse(content="We open at 9.")
    port = free_port()
    settings = e2e_settings(
        gmail_port=port,
        gmail_sandbox_state_file=tmp_path / "sandbox.json",
        gmail_api_base_url=None,
        gmail_oauth_token_url=None,
        gmail_oauth_auth_url=None,
        gmail_oidc_certs_url=None,
        gmail_sandbox_enabled=True,
    )
    assert settings.resolved_gmail_api_base_url == f"http://127.0.0.1:{port}/_sandbox/gmail"
    customer = new_customer()
    async with serve_app(create_app(settings), port=port):
        connected = await connect_gmail(sessions, tenant, settings)
        first = await _control(
            settings,
            "deliver",
            {"to": connected.email, "from": customer, "subject": "Hours", "text": "When do you open?"},
        )
        await run_sync(settings, connected.account_id)
        before = (await _control(settings, f"sent?mailbox={connected.email}"))["messages"]
    assert [m["text"] for m in before] == ["We open at 9."]
    assert settings.gmail_sandbox_state_path.is_file()

    async with serve_app(create_app(settings), port=port):  # a restart: a new process reads the file back
        # the access token we hold expires: the sync must refresh it with the refresh token issued before
        await _control(settings, "expire_tokens", {"email": connected.email})
        second = await _control(
            settings,
            "deliver",
            {"to": connected.email, "from": customer, "subject": "Hours", "text": "And on Sunday?"},
        )
        await run_sync(settings, connected.account_id)
        after = (await _control(settings, f"sent?mailbox={connected.email}"))["messages"]
    async with sessions() as session:
        mailbox = (
            await session.exec(
                select(GmailMailbox).where(GmailMailbox.channel_account_id == connected.account_id)
            )
        ).one()
    assert (mailbox.status, mailbox.last_error) == ("active", None)
    assert int(second["id"], 16) > int(first["id"], 16) and int(second["historyId"]) > int(first["historyId"])
    assert [m["text"] for m in after] == [
        "We open at 9.",
        "We open at 9.",
    ]  # the sends of before are kept too
    assert len(script.requests) == 2


def test_ids_never_repeat_even_without_the_state_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    mail = {"to": "support@example.com", "from": "ana@example.net", "subject": "Hi", "text": "hello"}
    first = GmailSandbox().deliver(mail)["id"]
    second = GmailSandbox().deliver(mail)["id"]  # a restart that lost (or never had) its file
    assert len(first) == len(second) == 16 and int(second, 16) > int(first, 16)

    kept = GmailSandbox.load(tmp_path / "state.json")
    kept.deliver(mail)
    kept.refresh_tokens["1//r"] = "support@example.com"
    kept.save()
    again = GmailSandbox.load(tmp_path / "state.json")
    assert again.refresh_tokens == {"1//r": "support@example.com"}
    assert len(again.mailbox("support@example.com").messages) == 1 and again.seq >= kept.seq

    (tmp_path / "broken.json").write_text("{not json")
    assert GmailSandbox.load(tmp_path / "broken.json").mailboxes == {}  # logged, started afresh
