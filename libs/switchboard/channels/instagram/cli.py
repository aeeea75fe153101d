"""CLI for Instagram: ``switchboard channel add-instagram`` and ``switchboard simulate instagram``.

Like :mod:`switchboard.channels.whatsapp.cli`: the commands join the shared ``channel`` and ``simulate``
groups when imported; the logic (building, retargeting and signing a delivery, reading the sandbox)
is in plain functions that tests and the load test reuse.
"""

from __future__ import annotations

import asyncio
import copy
import json
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer

from switchboard.channels.accounts import api_base_option
from switchboard.channels.meta import post_signed
from switchboard.cli.channel_common import (
    SAMPLE_MEDIA,
    account_of_tenant,
    check_simulate_source,
    connect_account,
    explain_no_reply,
    is_loopback_url,
    no_reply_coming,
    nothing_new_stored,
    print_sent,
)
from switchboard.cli.root import channel_app, simulate_app
from switchboard.cli.runner import command_settings, friendly_errors

__all__ = [
    "SAMPLE_MEDIA",
    "add_instagram",
    "answerable_messages",
    "build_text_webhook",
    "refresh_mids",
    "retarget_payload",
    "simulate_instagram",
]

SIMULATED_IGSID = "1000000000000001"
"""The customer of ``simulate instagram --text`` without ``--from`` (the payloads' customer)."""


def build_text_webhook(*, account_id: str, igsid: str, text: str) -> dict[str, Any]:
    """A real-shaped text DM (the shape of ``tests/fixtures/payloads/instagram/text_dm.json``) timestamped now."""
    now_ms = int(time.time() * 1000)
    mid = "aWdfSIM" + uuid.uuid4().hex
    return {
        "object": "instagram",
        "entry": [
            {
                "time": now_ms,
                "id": account_id,
                "messaging": [
                    {
                        "sender": {"id": igsid},
                        "recipient": {"id": account_id},
                        "timestamp": now_ms,
                        "message": {"mid": mid, "text": text},
                    }
                ],
            }
        ],
    }


def _items(body: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for entry in body.get("entry") or []:
        for key in ("messaging", "standby"):
            out += [i for i in entry.get(key) or [] if isinstance(i, dict)]
        out += [
            c.get("value") for c in entry.get("changes") or [] if isinstance((c or {}).get("value"), dict)
        ]
    return out


def retarget_payload(
    body: dict[str, Any], *, account_id: str, keep_timestamps: bool = False
) -> dict[str, Any]:
    """``body`` sent to ``account_id``: every ``entry.id`` and the business party of each item replaced,
    and, unless ``keep_timestamps``, timestamps moved to now (milliseconds, relative order kept)."""
    body = copy.deepcopy(body)
    for entry in body.get("entry") or []:
        old = str(entry.get("id"))
        entry["id"] = account_id
        for item in _items({"entry": [entry]}):
            for side in ("sender", "recipient"):
                if isinstance(item.get(side), dict) and str(item[side].get("id")) == old:
                    item[side]["id"] = account_id
    stamped = [i for i in _items(body) if str(i.get("timestamp", "")).isdigit()]
    if stamped and not keep_timestamps:
        newest = max(int(i["timestamp"]) for i in stamped)
        now_ms = int(time.time() * 1000)
        for item in stamped:
            item["timestamp"] = now_ms - (newest - int(item["timestamp"]))
    return body


def refresh_mids(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with a fresh suffix on the mid of every message and postback it carries (so a file can
    be posted again); mids that point at earlier messages (reactions, reads, unsends, edits) stay."""
    body = copy.deepcopy(body)
    suffix = "SIM" + uuid.uuid4().hex[:12]
    for item in _items(body):
        for key in ("message", "postback"):
            inner = item.get(key)
            if isinstance(inner, dict) and isinstance(inner.get("mid"), str) and not inner.get("is_deleted"):
                inner["mid"] += suffix
    return body


def _serve_sample_media(body: dict[str, Any], cdn_base: str) -> list[tuple[str, bytes]]:
    """Point every attachment / story URL of ``body`` at the sandbox CDN; returns ``(asset, bytes)`` to put."""
    uploads = []
    for item in _items(body):
        message = item.get("message") if isinstance(item.get("message"), dict) else {}
        payloads = [a.get("payload") for a in message.get("attachments") or [] if isinstance(a, dict)]
        kinds = [str(a.get("type")) for a in message.get("attachments") or [] if isinstance(a, dict)]
        story = (message.get("reply_to") or {}).get("story")
        if isinstance(story, dict):
            payloads.append(story)
            kinds.append("image")
        for kind, payload in zip(kinds, payloads, strict=False):
            if isinstance(payload, dict) and payload.get("url"):
                asset = "sim-" + uuid.uuid4().hex[:16]
                payload["url"] = f"{cdn_base}/_cdn/{asset}"
                uploads.append((asset, SAMPLE_MEDIA["audio" if kind == "audio" else "image"]))
    return uploads


def senders_of(body: dict[str, Any], account_id: str) -> list[str]:
    """The customers' IGSIDs that send something in ``body`` (not the business account's own echoes)."""
    found = {str((item.get("sender") or {}).get("id") or "") for item in _items(body)}
    return sorted(igsid for igsid in found if igsid and igsid != account_id)


async def give_sandbox_profiles(
    client: httpx.AsyncClient, sandbox: str, igsids: list[str], control: dict[str, str]
) -> None:
    """Put a profile in the sandbox for each of ``igsids`` that has none, so the worker's profile lookup
    (``GET /{igsid}?fields=name,username``) finds a name as it does for a real customer, instead of the
    error 100 the sandbox answers (like Meta) for an unknown id. A profile put before is left as it is."""
    for igsid in igsids:
        known = await client.get(f"{sandbox}/v21.0/{igsid}", headers={"Authorization": "Bearer sandbox"})
        if known.status_code == 400:
            profile = {"name": f"Sandbox Customer {igsid[-4:]}", "username": f"sandbox.customer.{igsid[-4:]}"}
            await client.put(f"{sandbox}/_control/profiles/{igsid}", json=profile, headers=control)


def answerable_messages(body: dict[str, Any]) -> int:
    """How many customer messages in ``body`` the agent answers (not reads, reactions, echoes, standby...)."""
    from switchboard.channels.instagram.normalize import normalize_delivery

    return sum(1 for message in normalize_delivery(body).messages if message.action == "process")


@channel_app.command("add-instagram")
@friendly_errors
def add_instagram(
    tenant: Annotated[str, typer.Option(help="Tenant slug or id.")],
    account_id: Annotated[
        str, typer.Option(help="Instagram professional account id (digits; the webhooks' entry.id).")
    ],
    access_token: Annotated[
        str | None,
        typer.Option(
            help="Instagram-Login user token or Page access token (stored encrypted). Omit for the local sandbox.",
            envvar="INSTAGRAM_ACCESS_TOKEN",
        ),
    ] = None,
    display_name: Annotated[
        str | None, typer.Option(help="Shown in logs and the admin API (@handle).")
    ] = None,
    api_base: Annotated[
        str | None,
        typer.Option(
            help="Graph API this account talks to: 'sandbox' (the sandbox in the Instagram service), "
            "'real' (INSTAGRAM_GRAPH_BASE_URL, default https://graph.instagram.com) or a URL "
            "(https://graph.facebook.com for a Page-linked account). Default: 'real' with --access-token, "
            "'sandbox' without. A URL is the operator's choice (trusted); the console offers tenants "
            "only 'sandbox' and 'real'.",
            metavar="sandbox|real|URL",
        ),
    ] = None,
) -> None:
    """Connect an Instagram professional account to a tenant: webhooks whose entry.id matches are routed to it."""
    if not account_id.isdigit():
        raise ValueError("--account-id must be digits (the Instagram professional account id)")
    if access_token is not None and not access_token.strip():
        raise ValueError("--access-token is empty: give the token, or omit it for the local sandbox")
    settings = command_settings()
    account, created = connect_account(
        settings,
        tenant=tenant,
        channel="instagram",
        external_account_id=account_id,
        access_token=access_token,
        display_name=display_name,
        label="Instagram account",
        api_base_url=api_base_option(api_base, has_token=access_token is not None),
    )
    typer.echo(
        f"{'connected' if created else 'updated'} instagram account {account_id} id={account.id} "
        f"graph={settings.channel_api_base_url('instagram', account.api_base_url)}"
    )
    typer.echo(
        "webhook URL: https://<your-host>/webhooks/instagram "
        f"(locally {settings.service_url(settings.instagram_port)}/webhooks/instagram), object `instagram`"
    )


@simulate_app.command("instagram")
@friendly_errors
def simulate_instagram(
    text: Annotated[
        str | None, typer.Option(help="Text the simulated customer sends (or --payload, not both).")
    ] = None,
    from_: Annotated[
        str | None,
        typer.Option(
            "--from",
            metavar="IGSID",
            help=f"Customer's Instagram-scoped id (IGSID) of a --text message (default {SIMULATED_IGSID}). "
            "Refused with --payload: the payload names its sender.",
        ),
    ] = None,
    payload: Annotated[
        Path | None, typer.Option(help="Raw webhook body (JSON file) to post instead of --text.")
    ] = None,
    tenant: Annotated[
        str, typer.Option("--tenant", "-t", help="Tenant slug whose Instagram account receives it.")
    ] = "demo",
    keep_timestamps: Annotated[
        bool,
        typer.Option(
            help="With --payload only (refused with --text): post its timestamps as they are "
            "(default: moved to now, their order kept). An old "
            "message then falls outside the 24-hour window and the AI does not answer it."
        ),
    ] = False,
    keep_ids: Annotated[
        bool,
        typer.Option(
            help="With --payload only (refused with --text): post its mids as they are "
            "(default: a fresh suffix, so a file can be posted again)."
        ),
    ] = False,
    timeout: Annotated[
        float,
        typer.Option(
            metavar="SECONDS",
            help="Seconds to wait for the replies (what the Instagram sandbox receives) before saying why "
            "none came.",
        ),
    ] = 30.0,
) -> None:
    """Sign and post a real-shaped Instagram webhook to the running Instagram service, then print (JSON
    lines) the messages the Instagram sandbox received while waiting. Exit 0 when the webhook was accepted;
    1 when the service or the sandbox cannot be reached or the webhook was refused; 2 on a bad option or
    a missing file or account.

    Attachment and story URLs of a --payload are pointed at the sandbox's CDN with sample bytes (the
    payloads' own links are fake), so media is copied and read as in production. A sender the sandbox
    has no profile for gets one ("Sandbox Customer 0001"), so the agent and the console show a name.
    --from is for --text: with --payload it is refused (exit 2), as the payload names its own sender;
    --keep-ids and --keep-timestamps are for --payload and refused with --text.
    """
    check_simulate_source(
        text=text,
        payload=payload,
        text_only={"--from": (from_, "the payload names its sender")},
        payload_only={
            "--keep-ids": (keep_ids, "a --text message always gets a new mid"),
            "--keep-timestamps": (keep_timestamps, "a --text message is sent now"),
        },
    )
    settings = command_settings()
    account_id, sandbox = account_of_tenant(
        settings,
        tenant=tenant,
        channel="instagram",
        missing=f"tenant {tenant} has no Instagram account: run `switchboard channel add-instagram`",
    )
    uploads: list[tuple[str, bytes]] = []
    if payload is not None:
        try:
            document = json.loads(payload.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{payload} is not a JSON webhook body: {exc}") from None
        body = retarget_payload(document, account_id=account_id, keep_timestamps=keep_timestamps)
        if not keep_ids:
            body = refresh_mids(body)
        if is_loopback_url(sandbox):
            uploads = _serve_sample_media(body, sandbox)
    else:
        body = build_text_webhook(account_id=account_id, igsid=from_ or SIMULATED_IGSID, text=text or "")
    raw = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    webhook_url = settings.service_url(settings.instagram_port) + "/webhooks/instagram"

    control = {"Authorization": f"Bearer {settings.secret('admin_token')}"}  # the sandbox's control endpoints

    async def go() -> int:
        async with httpx.AsyncClient(timeout=10) as client:
            try:
                if not is_loopback_url(sandbox):  # a real Graph API: no sandbox, and never the admin token
                    raise KeyError("no sandbox")
                after = (await client.get(f"{sandbox}/_control/sent", headers=control)).json()["last_seq"]
                for asset, data in uploads:
                    await client.put(f"{sandbox}/_control/cdn/{asset}", content=data, headers=control)
                await give_sandbox_profiles(client, sandbox, senders_of(body, account_id), control)
            except (httpx.HTTPError, ValueError, KeyError):
                after = None
            posted_at = datetime.now(UTC) - timedelta(seconds=1)  # the outbox rows of this post are newer
            try:
                response = await post_signed(
                    client, webhook_url, raw, settings.secret("instagram_app_secret")
                )
            except httpx.HTTPError as exc:
                typer.secho(
                    f"error: cannot reach {webhook_url} ({type(exc).__name__}); is `switchboard run` running?",
                    fg=typer.colors.RED,
                    err=True,
                )
                return 1
            typer.secho(f"webhook: HTTP {response.status_code} {response.text}", err=True)
            if response.status_code != 200:
                return 1
            result = (
                response.json()
                if response.headers.get("content-type", "").startswith("application/json")
                else {}
            )
            if answerable_messages(body) == 0:
                typer.secho(
                    "accepted, but the payload holds no customer message to answer "
                    "(reads, reactions, story mentions, echoes, standby...): no reply will come",
                    err=True,
                )
                return 0
            if isinstance(result, dict) and result.get("stored") == 0:
                typer.secho(nothing_new_stored(result, keep_ids=keep_ids), err=True)
                return 0
            if after is None:
                typer.secho("no Instagram sandbox reachable: not waiting for replies", err=True)
                return 0
            came = await print_sent(
                client,
                f"{sandbox}/_control/sent",
                after=after,
                wait_s=timeout,
                headers=control,
                fields=("to", "type", "text", "id", "account_id", "tag", "quick_replies"),
                give_up=no_reply_coming(settings, tenant=tenant, channel="instagram", since=posted_at),
            )
            if not came:
                await explain_no_reply(
                    settings,
                    tenant=tenant,
                    channel="instagram",
                    since=posted_at,
                    hint=(
                        f"no reply within {timeout:g} s. The message is stored; the conversation may be with a "
                        f"person (MODE human or waiting in `switchboard conversations list --tenant {tenant}`), "
                        "or the worker still working (raise --timeout)"
                    ),
                )
            return 0

    raise typer.Exit(asyncio.run(go()))
