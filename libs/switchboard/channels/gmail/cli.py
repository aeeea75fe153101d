"""CLI for Gmail: ``switchboard channel add-gmail`` and ``switchboard simulate gmail``.

Like :mod:`switchboard.channels.whatsapp.cli`, the commands join the shared ``channel`` and ``simulate``
groups when this module is imported and run with the shared error wrapper and database runner. The
logic (catching the code on a loopback redirect, delivering a mail and reading the sandbox's sends)
lives in plain functions so tests and the load test reuse them.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
import webbrowser
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qs, urlsplit

import httpx
import typer

from switchboard.cli.channel_common import check_simulate_source, explain_no_reply, is_loopback_url
from switchboard.cli.root import channel_app, simulate_app
from switchboard.cli.runner import command_settings, friendly_errors, run_db
from switchboard.settings import Settings

__all__ = [
    "add_gmail",
    "simulate_gmail",
    "loopback_receiver",
    "push_url",
    "deliver_and_push",
    "wait_for_sends",
]

SIMULATED_SENDER = "customer@example.net"
"""The sender of ``simulate gmail --text`` without ``--from``."""

SIMULATED_SUBJECT = "Question"
"""The subject of ``simulate gmail --text`` without ``--subject``."""

CONNECT_SANDBOX_SECRETS = '{"installed": {"client_id": "sandbox", "client_secret": "sandbox"}}'
"""An OAuth client file the Gmail sandbox accepts (docs/channels/gmail.md#try-it-without-google)."""

_DONE_PAGE = (
    b"<!doctype html><title>Switchboard</title><p>Switchboard received the authorization. "
    b"You can close this window and go back to the terminal.</p>"
)


async def loopback_receiver(port: int = 0) -> tuple[asyncio.Server, int, asyncio.Future[str]]:
    """A one-shot HTTP listener on ``127.0.0.1:port`` (0: a free port) for Google's loopback redirect.

    The first request with a ``code=`` or ``error=`` query resolves the future with its full path
    (``/?code=...&state=...``) and gets a short "you can close this window" page; other requests
    (a browser's ``/favicon.ico``) get 404.

    Returns:
        ``(server, port, future)``: close the server when done.
    """
    loop = asyncio.get_running_loop()
    received: asyncio.Future[str] = loop.create_future()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request_line = (await asyncio.wait_for(reader.readline(), 10)).decode("latin-1")
            while (await asyncio.wait_for(reader.readline(), 10)) not in (b"\r\n", b"\n", b""):
                pass  # headers: not needed
            parts = request_line.split()
            target = parts[1] if len(parts) >= 2 else "/"
            query = parse_qs(urlsplit(target).query)
            if ("code" in query or "error" in query) and not received.done():
                received.set_result(target)
                status, body = b"200 OK", _DONE_PAGE
            else:
                status, body = b"404 Not Found", b"not found"
            writer.write(
                b"HTTP/1.1 " + status + b"\r\nContent-Type: text/html; charset=utf-8\r\n"
                b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body
            )
            await writer.drain()
        except (TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port)
    bound = server.sockets[0].getsockname()[1]
    return server, bound, received


async def _follow_consent(url: str) -> None:
    """GET the sandbox's consent URL and follow its redirect to the loopback listener (errors are the
    listener's to report: it then times out with a clear message)."""
    try:
        async with httpx.AsyncClient(timeout=30, follow_redirects=True) as client:
            await client.get(url)
    except httpx.HTTPError:
        pass


@channel_app.command("add-gmail")
@friendly_errors
def add_gmail(
    tenant: Annotated[str, typer.Option(help="Tenant slug or id.")],
    client_secrets: Annotated[
        Path,
        typer.Option(help="The OAuth client JSON from Google Cloud console (Credentials → OAuth client ID)."),
    ],
    loopback: Annotated[
        bool,
        typer.Option(
            help="Catch the code on a redirect to http://127.0.0.1:PORT/ (a listener of this command) "
            "instead of pasting it."
        ),
    ] = False,
    port: Annotated[int, typer.Option(help="Loopback port (0: any free port).")] = 0,
    redirect_uri: Annotated[
        str | None,
        typer.Option(
            help="Redirect URI without --loopback (default: the file's first redirect_uris entry, else "
            "http://127.0.0.1). After consent the browser lands there; paste its URL or the code."
        ),
    ] = None,
    login_hint: Annotated[
        str | None, typer.Option(help="The mailbox address, pre-filled on the consent page.")
    ] = None,
    open_browser: Annotated[bool, typer.Option("--open", help="Open the consent URL in a browser.")] = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the loopback redirect.")] = 300.0,
) -> None:
    """Connect a Gmail mailbox to a tenant with OAuth (offline access: a refresh token is stored encrypted).

    Prints the consent URL. Without --loopback, paste the code (or the whole URL the browser was sent to)
    on stdin; with --loopback the command listens on 127.0.0.1 and takes the code from the redirect.
    Connecting a mailbox again (after `needs_reauth`) keeps its conversations. Against the local sandbox
    (GMAIL_API_BASE_URL unset) consent is granted at once for --login-hint (default support@example.com),
    and with --loopback (and no --open) the command follows the consent URL itself.
    """
    from switchboard.channels.gmail.client import GmailClient
    from switchboard.channels.gmail.mailboxes import (
        code_from_answer,
        finish_authorization,
        start_authorization,
    )
    from switchboard.channels.gmail.oauth import load_client_secrets
    from switchboard.crypto import CredentialCipher
    from switchboard.tenants import get_tenant

    secrets = load_client_secrets(client_secrets)
    settings = command_settings()
    cipher = CredentialCipher(settings.secret("encryption_key").encode())

    async def work(sessions, settings: Settings):  # type: ignore[no-untyped-def]
        async with sessions() as session:
            owner = await get_tenant(session, tenant)
        server = None
        follow: asyncio.Future[None] | None = None
        try:
            if loopback:
                server, bound, received = await loopback_receiver(port)
                uri = f"http://127.0.0.1:{bound}/"
            else:
                uri = redirect_uri or (
                    secrets.redirect_uris[0] if secrets.redirect_uris else "http://127.0.0.1"
                )
            auth = start_authorization(
                cipher=cipher,
                auth_url=settings.resolved_gmail_auth_url,
                scopes=settings.gmail_oauth_scopes,
                tenant_id=owner.id,
                secrets=secrets,
                redirect_uri=uri,
                login_hint=login_hint,
            )
            # the local sandbox grants consent without a person: this command follows its redirect itself
            sandbox_follows = not open_browser and server is not None and is_loopback_url(auth.url)
            typer.echo(
                "The local Gmail sandbox approves access on its own (no browser, no sign-in): this command "
                "follows its consent URL itself:"
                if sandbox_follows
                else "Open this URL, sign in as the mailbox and allow access:"
            )
            typer.echo(auth.url)
            if open_browser:  # in a thread: a browser command may wait, and the listener must answer
                if not await asyncio.to_thread(webbrowser.open, auth.url):
                    typer.echo(
                        "no browser could be opened here: open the URL above yourself "
                        "(against the sandbox, `curl -sL '<URL>'` is enough)",
                        err=True,
                    )
            elif sandbox_follows:
                follow = asyncio.ensure_future(_follow_consent(auth.url))
            if server is not None:
                typer.echo(f"waiting for the redirect on {uri} (up to {timeout:g} s)...", err=True)
                try:
                    answer = await asyncio.wait_for(received, timeout)
                except TimeoutError:
                    raise ValueError(f"no redirect within {timeout:g} s: run the command again") from None
            else:
                answer = await asyncio.to_thread(
                    typer.prompt, "Paste the code (or the URL the browser was sent to)", err=True
                )
            code = code_from_answer(answer, state=auth.state)
            client = GmailClient(
                settings.resolved_gmail_api_base_url,
                settings.resolved_gmail_token_url,
                timeout_s=settings.gmail_timeout_s,
            )
            try:
                return await finish_authorization(
                    sessions=sessions,
                    cipher=cipher,
                    client=client,
                    tenant_id=owner.id,
                    state=auth.state,
                    code=code,
                )
            finally:
                await client.aclose()
        finally:
            if follow is not None:
                follow.cancel()
            if server is not None:
                server.close()
                await server.wait_closed()

    connected = run_db(work, settings=settings)
    typer.echo(
        f"{'reconnected' if connected.reconnected else 'connected'} gmail mailbox {connected.email} "
        f"id={connected.account_id} (tenant {tenant})"
    )
    push = settings.service_url(settings.gmail_port) + "/webhooks/gmail"
    typer.echo(
        f"push endpoint: https://<your-host>/webhooks/gmail (locally {push}); without GMAIL_PUBSUB_TOPIC "
        f"the mailbox is polled every {settings.gmail_poll_interval_s:g} s"
    )


def push_url(settings: Settings) -> tuple[str, str | None]:
    """Where the sandbox posts pushes for the running Gmail service: ``(url, audience)``; the URL carries
    the push secret when no OIDC audience is configured."""
    base = settings.service_url(settings.gmail_port) + "/webhooks/gmail"
    if settings.gmail_push_audience:
        return base, settings.gmail_push_audience
    return f"{base}?token={settings.secret('gmail_push_secret')}", None


async def deliver_and_push(
    client: httpx.AsyncClient, settings: Settings, spec: dict[str, Any]
) -> dict[str, Any]:
    """A mail arrives in the sandbox mailbox ``spec["to"]`` and the sandbox pushes the notification to
    the Gmail service. Returns the sandbox's answer (``id``, ``threadId``, ``historyId``, ``push_status``).

    Raises:
        httpx.HTTPError: the sandbox is not reachable or refused the mail.
    """
    url, audience = push_url(settings)
    response = await client.post(
        settings.resolved_gmail_api_base_url + "/_control/deliver",
        json={**spec, "push_url": url, **({"audience": audience} if audience else {})},
    )
    response.raise_for_status()
    return response.json()


async def wait_for_sends(
    client: httpx.AsyncClient,
    settings: Settings,
    mailbox: str,
    *,
    after: int,
    timeout_s: float,
    settle_s: float = 3.0,
) -> list[dict[str, Any]]:
    """Mails the sandbox recorded as sent from ``mailbox`` after sequence ``after``, waiting up to
    ``timeout_s`` for the first and ``settle_s`` after the newest."""
    sent_url = settings.resolved_gmail_api_base_url + "/_control/sent"
    deadline = time.monotonic() + timeout_s
    found: list[dict[str, Any]] = []
    last_new = None
    while time.monotonic() < deadline:
        await asyncio.sleep(0.25)
        messages = (await client.get(sent_url, params={"mailbox": mailbox, "after": after})).json()[
            "messages"
        ]
        if messages:
            found += messages
            after = messages[-1]["seq"]
            last_new = time.monotonic()
        if last_new is not None and time.monotonic() - last_new > settle_s:
            break
    return found


def _reauth_message(tenant: str, mailbox: str) -> str:
    """What ``simulate gmail`` says about a mailbox whose grant Google (or the sandbox) refused."""
    return (
        f"mailbox {mailbox} needs reauth (its refresh token was refused, so nothing syncs or answers): run "
        f"echo '{CONNECT_SANDBOX_SECRETS}' > client_secret.json && switchboard channel add-gmail --tenant "
        f"{tenant} --client-secrets client_secret.json --loopback --login-hint {mailbox}"
    )


@simulate_app.command("gmail")
@friendly_errors
def simulate_gmail(
    text: Annotated[str | None, typer.Option(help="Plain-text body of the mail.")] = None,
    from_: Annotated[
        str | None,
        typer.Option(
            "--from",
            metavar="ADDR",
            help=f"Sender address of a --text mail (default {SIMULATED_SENDER}). Refused with --payload: "
            "the payload names its sender (its From header).",
        ),
    ] = None,
    subject: Annotated[
        str | None,
        typer.Option(
            help=f"Subject of a --text mail (default {SIMULATED_SUBJECT!r}). Refused with --payload: the "
            "payload has its own Subject header."
        ),
    ] = None,
    payload: Annotated[
        Path | None,
        typer.Option(
            help="A Gmail messages.get answer (JSON file, format=full) to deliver instead of --text."
        ),
    ] = None,
    tenant: Annotated[
        str, typer.Option("--tenant", "-t", help="Tenant slug whose Gmail mailbox receives it.")
    ] = "demo",
    thread_id: Annotated[str | None, typer.Option(help="Deliver into this Gmail thread (a reply).")] = None,
    timeout: Annotated[
        float,
        typer.Option(
            metavar="SECONDS",
            help="Seconds to wait for the reply (what the sandbox records as sent from the mailbox) "
            "before saying why none came.",
        ),
    ] = 30.0,
) -> None:
    """Deliver a mail into the tenant's sandbox mailbox, let the sandbox push the notification to the
    running Gmail service, then print (JSON lines) the mails the sandbox received as sent from that
    mailbox while waiting. Needs `switchboard run` (or the Gmail service and workers) on the sandbox,
    and the mailbox connected once with `channel add-gmail` (the error says how). Exit 0 when the push
    was acknowledged; 1 when the sandbox cannot be reached or refused the push; 2 on a bad option, an
    unconnected mailbox, or one that needs reauth (the error names the `add-gmail` command to run).
    --from and --subject are for --text: with --payload they are refused (exit 2), as the payload has
    its own From and Subject headers.
    """
    from sqlmodel import select

    from switchboard.db.models import ChannelAccount, GmailMailbox
    from switchboard.tenants import get_tenant

    check_simulate_source(
        text=text,
        payload=payload,
        text_only={
            "--from": (from_, "the payload names its sender"),
            "--subject": (subject, "the payload has its own Subject header"),
        },
    )
    settings = command_settings()

    async def mailbox_status(sessions, _settings):  # type: ignore[no-untyped-def]
        async with sessions() as session:
            found = (await session.exec(select(GmailMailbox).where(GmailMailbox.email == mailbox))).first()
            return found.status if found is not None else None

    async def find_mailbox(sessions, _settings):  # type: ignore[no-untyped-def]
        async with sessions() as session:
            owner = await get_tenant(session, tenant)
            mailbox = (
                await session.exec(select(GmailMailbox).where(GmailMailbox.tenant_id == owner.id))
            ).first()
            account = None
            if mailbox is None:
                account = (
                    await session.exec(
                        select(ChannelAccount).where(
                            ChannelAccount.tenant_id == owner.id, ChannelAccount.channel == "gmail"
                        )
                    )
                ).first()
        if mailbox is None:
            # the seeded demo lists its mailbox as a channel account, but nothing syncs it before OAuth
            named = (
                f"its Gmail account {account.external_account_id} is not connected yet"
                if account
                else ("it has no Gmail mailbox")
            )
            raise ValueError(
                f"tenant {owner.slug}: {named}. Connect it first (against the sandbox no Google account "
                f"is needed): echo '{CONNECT_SANDBOX_SECRETS}' > client_secret.json && switchboard channel "
                f"add-gmail --tenant {owner.slug} --client-secrets client_secret.json --loopback"
            )
        if mailbox.status == "needs_reauth":
            raise ValueError(_reauth_message(owner.slug, mailbox.email))
        return mailbox.email

    mailbox = run_db(find_mailbox, settings=settings)
    spec: dict[str, Any] = {"to": mailbox}
    if payload is not None:
        try:
            spec["payload"] = json.loads(payload.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{payload} is not a JSON messages.get answer: {exc}") from None
        if not isinstance(spec["payload"], dict) or "payload" not in spec["payload"]:
            raise ValueError(f"{payload} is not a messages.get answer (no 'payload' part)")
    else:
        sender = from_ or SIMULATED_SENDER
        spec.update(
            {
                "from": sender,
                "subject": subject or SIMULATED_SUBJECT,
                "text": text or "",
                "message_id": f"<sim-{uuid.uuid4().hex}@{sender.rpartition('@')[2] or 'example.net'}>",
            }
        )
    if thread_id:
        spec["thread_id"] = thread_id

    async def go() -> int:
        if not is_loopback_url(settings.resolved_gmail_api_base_url):  # never send the admin token to Google
            typer.secho(
                "error: simulate gmail needs the Gmail sandbox (unset GMAIL_API_BASE_URL)",
                fg=typer.colors.RED,
                err=True,
            )
            return 2
        control = {
            "Authorization": f"Bearer {settings.secret('admin_token')}"
        }  # the sandbox's control endpoints
        async with httpx.AsyncClient(timeout=15, headers=control) as client:
            sent_url = settings.resolved_gmail_api_base_url + "/_control/sent"
            try:
                probe = await client.get(sent_url, params={"mailbox": mailbox})
                if probe.status_code != 200:
                    typer.secho(
                        f"error: {settings.resolved_gmail_api_base_url} is not the Gmail sandbox (HTTP "
                        f"{probe.status_code}): simulate gmail needs it (unset GMAIL_API_BASE_URL)",
                        fg=typer.colors.RED,
                        err=True,
                    )
                    return 1
                after = probe.json()["last_seq"]
                posted_at = datetime.now(UTC) - timedelta(seconds=1)  # the outbox rows of this mail are newer
                delivered = await deliver_and_push(client, settings, spec)
            except httpx.HTTPError as exc:
                typer.secho(
                    f"error: cannot reach the Gmail sandbox at {settings.resolved_gmail_api_base_url} "
                    f"({type(exc).__name__}); is `switchboard run` running?",
                    fg=typer.colors.RED,
                    err=True,
                )
                return 1
            status = delivered.get("push_status")
            typer.secho(
                f"delivered {delivered['id']} in thread {delivered['threadId']} to {mailbox}; "
                f"push: HTTP {status}",
                err=True,
            )
            if status != 200:
                return 1
            replies = await wait_for_sends(client, settings, mailbox, after=after, timeout_s=timeout)
            for reply in replies:
                headers = reply.get("headers") or {}
                typer.echo(
                    json.dumps(
                        {
                            "to": reply.get("to"),
                            "subject": headers.get("Subject"),
                            "text": reply.get("text"),
                            "threadId": reply.get("threadId"),
                            "in_reply_to": headers.get("In-Reply-To"),
                            "auto_submitted": headers.get("Auto-Submitted"),
                        },
                        ensure_ascii=False,
                    )
                )
            if (
                not replies
                and await asyncio.to_thread(run_db, mailbox_status, settings=settings) == "needs_reauth"
            ):
                # the sync found the grant refused while we waited: nothing will answer until reconnected
                typer.secho(f"error: {_reauth_message(tenant, mailbox)}", fg=typer.colors.RED, err=True)
                return 2
            if not replies:
                await explain_no_reply(
                    settings,
                    tenant=tenant,
                    channel="gmail",
                    since=posted_at,
                    hint=(
                        f"no reply within {timeout:g} s. The mail is in the mailbox; the sync may have found it "
                        "automated (no reply), handed the thread to a person, or still be working (raise --timeout)"
                    ),
                )
            return 0

    raise typer.Exit(asyncio.run(go()))
