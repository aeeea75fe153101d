"""``switchboard channel add-gmail`` (code pasted, or caught on a loopback redirect), the admin API's
authorize/connect, and ``switchboard simulate gmail`` through the running Gmail service and workers;
Google is the session's sandbox."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
from sqlmodel import select
from switchboard.channels.gmail.cli import SIMULATED_SUBJECT
from switchboard.db.models import ChannelAccount, GmailMailbox
from switchboard.queue import Queue
from switchboard.standins.offline_server import ScriptedResponse
from typer.testing import CliRunner

from services.gmail.main import create_app
from tests.utils.gmail import SECRETS, consent_code, control, new_mailbox, payload_path, sent_from
from tests.utils.net import free_port
from tests.utils.servers import serve_app
from tests.utils.workers import run_worker_burst


def _gmail_env(settings) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {
        "GMAIL_API_BASE_URL": settings.gmail_api_base_url,
        "GMAIL_OAUTH_TOKEN_URL": settings.gmail_oauth_token_url,
        "GMAIL_OAUTH_AUTH_URL": settings.gmail_oauth_auth_url,
        "GMAIL_PORT": str(settings.gmail_port),
        "GMAIL_OIDC_CERTS_URL": settings.gmail_oidc_certs_url,
    }


async def _invoke(cli, args: list[str], input: str | None = None, **env: str):  # type: ignore[no-untyped-def]
    from switchboard.cli import app

    return await asyncio.to_thread(CliRunner().invoke, app, args, env={**cli.env, **env}, input=input)


def _secrets_file(tmp_path) -> str:  # type: ignore[no-untyped-def]
    path = tmp_path / "client_secret.json"
    path.write_text(
        json.dumps(
            {
                "installed": {
                    "client_id": SECRETS.client_id,
                    "client_secret": SECRETS.client_secret,
                    "redirect_uris": ["http://127.0.0.1"],
                }
            }
        )
    )
    return str(path)


async def _mailbox(sessions, email: str) -> tuple[GmailMailbox, ChannelAccount]:  # type: ignore[no-untyped-def]
    async with sessions() as session:
        mailbox = (await session.exec(select(GmailMailbox).where(GmailMailbox.email == email))).one()
        return mailbox, await session.get(ChannelAccount, mailbox.channel_account_id)


async def test_add_gmail_with_a_pasted_code_and_on_a_loopback_redirect(
    make_settings, make_tenant, sessions, cli, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings()
    tenant = await make_tenant()
    secrets_file = _secrets_file(tmp_path)
    mailbox = new_mailbox()
    code = await consent_code(settings, mailbox)
    pasted = await _invoke(
        cli,
        ["channel", "add-gmail", "--tenant", tenant.slug, "--client-secrets", secrets_file],
        input=f"{code}\n",
        **_gmail_env(settings),
    )
    assert pasted.exit_code == 0, pasted.output
    assert settings.gmail_oauth_auth_url + "?response_type=code&client_id=" in pasted.stdout
    assert "access_type=offline" in pasted.stdout and "prompt=consent" in pasted.stdout
    assert f"connected gmail mailbox {mailbox}" in pasted.stdout
    row, account = await _mailbox(sessions, mailbox)
    assert (row.status, row.tenant_id, account.external_account_id) == ("active", tenant.id, mailbox)
    assert "refresh" not in account.credentials_encrypted and "GOCSPX" not in account.credentials_encrypted

    # revoked → needs_reauth; connecting again on a loopback redirect (the "browser" is curl) reconnects it
    async with sessions() as session, session.begin():
        stored = await session.get(GmailMailbox, row.id)
        stored.status = "needs_reauth"
        session.add(stored)
    looped = await _invoke(
        cli,
        [
            "channel",
            "add-gmail",
            "--tenant",
            tenant.slug,
            "--client-secrets",
            secrets_file,
            "--loopback",
            "--open",
            "--login-hint",
            mailbox,
            "--timeout",
            "60",
        ],
        BROWSER="curl -sfL -o /dev/null %s",
        **_gmail_env(settings),
    )
    assert looped.exit_code == 0, looped.output
    assert "redirect_uri=http%3A%2F%2F127.0.0.1%3A" in looped.stdout
    assert f"reconnected gmail mailbox {mailbox}" in looped.stdout
    assert (await _mailbox(sessions, mailbox))[0].status == "active"

    # against the sandbox, --loopback alone needs no browser: the command follows the consent URL itself
    another = new_mailbox()
    alone = await _invoke(
        cli,
        [
            "channel",
            "add-gmail",
            "--tenant",
            tenant.slug,
            "--client-secrets",
            secrets_file,
            "--loopback",
            "--login-hint",
            another,
            "--timeout",
            "60",
        ],
        BROWSER="false",
        **_gmail_env(settings),
    )
    assert alone.exit_code == 0, alone.output
    assert f"connected gmail mailbox {another}" in alone.stdout
    # and says so, instead of asking a person to open the URL it then follows anyway
    assert "The local Gmail sandbox approves access on its own" in alone.stdout
    assert "Open this URL" not in alone.stdout and "Open this URL, sign in as the mailbox" in pasted.stdout
    assert (await _mailbox(sessions, another))[0].status == "active"

    # a pasted redirect URL of another consent (its state) is refused; an unknown tenant too
    other = await consent_code(settings, new_mailbox())
    wrong = await _invoke(
        cli,
        ["channel", "add-gmail", "--tenant", tenant.slug, "--client-secrets", secrets_file],
        input=f"http://127.0.0.1/?code={other}&state=someone-else\n",
        **_gmail_env(settings),
    )
    assert wrong.exit_code == 2 and "the redirect's state is not this consent's" in wrong.stderr
    missing = await _invoke(
        cli,
        ["channel", "add-gmail", "--tenant", "no-such-shop", "--client-secrets", secrets_file],
        input="x\n",
        **_gmail_env(settings),
    )
    assert missing.exit_code == 2 and "no-such-shop" in missing.stderr


async def test_admin_api_authorize_then_connect(make_settings, make_tenant, sessions) -> None:  # type: ignore[no-untyped-def]
    from services.orchestrator.main import create_app as orchestrator_app

    settings = make_settings()
    tenant = await make_tenant()
    mailbox = new_mailbox()
    app = orchestrator_app(settings)
    admin = {"Authorization": f"Bearer {settings.secret('admin_token')}"}
    prefix = f"/v1/admin/tenants/{tenant.slug}/channels/gmail"
    client_secrets = {"web": {"client_id": SECRETS.client_id, "client_secret": SECRETS.client_secret}}
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://orchestrator.test"
        ) as http,
    ):
        assert (await http.post(f"{prefix}/authorize", json={})).status_code == 401
        started = await http.post(
            f"{prefix}/authorize",
            headers=admin,
            json={
                "client_secrets": client_secrets,
                "redirect_uri": "https://admin.example/cb",
                "login_hint": mailbox,
            },
        )
        assert started.status_code == 200, started.text
        body = started.json()
        async with httpx.AsyncClient() as browser:  # the owner's browser: the sandbox consents at once
            redirect = (await browser.get(body["consent_url"])).headers["location"]
        assert redirect.startswith("https://admin.example/cb?code=")
        code = parse_qs(urlsplit(redirect).query)["code"][0]
        bad_state = await http.post(
            f"{prefix}/connect", headers=admin, json={"state": "forged", "code": code}
        )
        other_state = await http.post(
            f"{prefix}/connect",
            headers=admin,
            json={"state": body["state"], "code": redirect.replace("state=", "state=x")},
        )
        connected = await http.post(
            f"{prefix}/connect", headers=admin, json={"state": body["state"], "code": redirect}
        )
        listed = await http.get(prefix, headers=admin)
        bad_secrets = await http.post(
            f"{prefix}/authorize",
            headers=admin,
            json={"client_secrets": {"web": {}}, "redirect_uri": "https://x/cb"},
        )
        openapi = (await http.get("/openapi.json")).json()
    assert bad_state.status_code == 400 and "unknown state" in bad_state.json()["detail"]
    assert other_state.status_code == 400 and "not this consent's" in other_state.json()["detail"]
    assert connected.status_code == 200, connected.text
    got = connected.json()
    assert (got["email"], got["status"], got["reconnected"]) == (mailbox, "active", False)
    assert [m["email"] for m in listed.json()] == [mailbox]
    assert bad_secrets.status_code == 422
    documented = openapi["paths"]["/v1/admin/tenants/{slug}/channels/gmail/connect"]["post"]
    assert documented["summary"].startswith("Finish connecting a Gmail mailbox")
    assert {"400", "409", "502"} <= set(documented["responses"])


async def test_simulate_gmail_delivers_pushes_and_prints_the_reply(scene, cli, make_settings) -> None:  # type: ignore[no-untyped-def]
    scene.script.default = ScriptedResponse(content="The shop opens at 9.")
    port = free_port()
    settings = scene.settings.model_copy(update={"gmail_port": port})
    env = _gmail_env(settings)

    async def workers_until(task: asyncio.Task[Any]) -> None:
        while not task.done():
            await run_worker_burst(settings, Queue.background)
            await run_worker_burst(settings)
            await asyncio.sleep(0.2)

    async with serve_app(create_app(settings), port=port):
        # without --subject: the simulated mail's default one
        task = asyncio.ensure_future(
            cli.arun(
                "simulate",
                "gmail",
                "--tenant",
                scene.tenant.slug,
                "--from",
                "ana@example.net",
                "--text",
                "When do you open?",
                "--timeout",
                "40",
                **env,
            )
        )
        await workers_until(task)
        out = task.result()
        task = asyncio.ensure_future(
            cli.arun(
                "simulate",
                "gmail",
                "--tenant",
                scene.tenant.slug,
                "--payload",
                str(payload_path("messages_get_full_multipart_alternative.json")),
                "--timeout",
                "40",
                **env,
            )
        )
        await workers_until(task)
        from_file = task.result()
        refused = await cli.arun("simulate", "gmail", "--tenant", scene.tenant.slug, **env)
    assert out.exit_code == 0, out.output
    assert "push: HTTP 200" in out.stderr
    # the runner captures this process's stdout: the in-test worker's LiteLLM lines land there too
    (line,) = [line for line in out.stdout.splitlines() if line.startswith("{")]
    reply = json.loads(line)
    assert (reply["to"], reply["subject"], reply["text"]) == (
        "ana@example.net",
        f"Re: {SIMULATED_SUBJECT}",
        "The shop opens at 9.",
    )
    assert reply["in_reply_to"].startswith("<sim-") and reply["auto_submitted"] == "auto-replied"
    assert from_file.exit_code == 0 and "push: HTTP 200" in from_file.stderr, from_file.output
    (file_reply,) = [json.loads(line) for line in from_file.stdout.splitlines() if line.startswith("{")]
    sent = await sent_from(settings, scene.mailbox)
    assert [m["text"] for m in sent] == ["The shop opens at 9.", "The shop opens at 9."]
    assert file_reply["to"] == sent[1]["to"] and file_reply["subject"].startswith("Re: ")
    assert refused.exit_code == 2 and "exactly one of --text or --payload" in refused.stderr
    await control(settings, "page_size", {"size": None})


async def test_simulate_gmail_never_sends_the_admin_token_to_a_real_gmail_api(scene, cli) -> None:  # type: ignore[no-untyped-def]
    env = {**_gmail_env(scene.settings), "GMAIL_API_BASE_URL": "https://gmail.googleapis.com"}
    out = await cli.arun(
        "simulate",
        "gmail",
        "--tenant",
        scene.tenant.slug,
        "--from",
        "ana@example.net",
        "--subject",
        "Hi",
        "--text",
        "hello",
        "--timeout",
        "1",
        **env,
    )
    # refused before any request: a probe of Google would have failed with a connection error instead
    assert out.exit_code == 2, out.output
    assert out.stderr.strip().splitlines()[-1] == (
        "error: simulate gmail needs the Gmail sandbox (unset GMAIL_API_BASE_URL)"
    )


async def test_simulate_gmail_on_an_unconnected_seeded_mailbox_says_what_to_run_and_exits_2(
    sessions, make_tenant, cli
) -> None:  # type: ignore[no-untyped-def]
    """The seeded demo has a Gmail channel account but no OAuth grant: nothing syncs it until
    ``channel add-gmail``, so ``simulate gmail`` names that command (with the sandbox's client file)."""
    from switchboard.tenants import add_channel_account

    tenant = await make_tenant()
    async with sessions() as session, session.begin():
        from switchboard.db.models import Tenant

        owner = await session.get(Tenant, tenant.id)
        await add_channel_account(
            session,
            tenant=owner,
            channel="gmail",
            external_account_id="support@example.com",
            display_name="support mailbox",
        )
    out = await cli.arun("simulate", "gmail", "--tenant", tenant.slug, "--text", "hello", "--timeout", "1")
    assert out.exit_code == 2, out.output
    message = out.stderr.strip().splitlines()[-1]
    assert message.startswith(
        f"error: tenant {tenant.slug}: its Gmail account support@example.com is not connected yet."
    )
    assert message.endswith(
        f"switchboard channel add-gmail --tenant {tenant.slug} --client-secrets client_secret.json --loopback"
    )
    assert (
        '\'{"installed": {"client_id": "sandbox", "client_secret": "sandbox"}}\' > client_secret.json'
        in message
    )
    none = await cli.arun("simulate", "gmail", "--tenant", (await make_tenant()).slug, "--text", "hello")
    assert none.exit_code == 2 and "it has no Gmail mailbox. Connect it first" in none.stderr


async def test_simulate_gmail_on_a_needs_reauth_mailbox_names_the_command_and_exits_2(
    scene, sessions, cli
) -> None:  # type: ignore[no-untyped-def]
    """A mailbox whose grant was refused never answers: ``simulate gmail`` says so instead of "no reply"."""
    async with sessions() as session, session.begin():
        stored = (
            await session.exec(
                select(GmailMailbox).where(GmailMailbox.channel_account_id == scene.account_id)
            )
        ).one()
        stored.status = "needs_reauth"
        session.add(stored)
    out = await cli.arun(
        "simulate",
        "gmail",
        "--tenant",
        scene.tenant.slug,
        "--text",
        "hello",
        "--timeout",
        "1",
        **_gmail_env(scene.settings),
    )
    assert out.exit_code == 2, out.output
    message = out.stderr.strip().splitlines()[-1]
    assert message.startswith(f"error: mailbox {scene.mailbox} needs reauth")
    assert message.endswith(
        f"switchboard channel add-gmail --tenant {scene.tenant.slug} --client-secrets client_secret.json "
        f"--loopback --login-hint {scene.mailbox}"
    )
