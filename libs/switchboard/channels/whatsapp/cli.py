"""CLI for WhatsApp: ``switchboard channel add-whatsapp`` and ``switchboard simulate whatsapp``.

The channel adds its commands to the shared ``channel`` and ``simulate`` groups
(:mod:`switchboard.cli.root`) when imported, and runs them with the shared error wrapper and database
runner (:mod:`switchboard.cli.runner`); both find a running system through ``DATA_DIR/run.json``. The
logic (signing, retargeting a payload, reading the sandbox) lives in plain functions so tests and the
load test reuse it.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import re
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
    "add_whatsapp",
    "simulate_whatsapp",
    "build_text_webhook",
    "build_tap_webhook",
    "offered_options",
    "sent_line",
    "find_offer",
    "retarget_payload",
    "refresh_message_ids",
    "answerable_messages",
    "post_signed",
]

SIMULATED_WA_ID = "+15550100099"
"""The customer of ``simulate whatsapp --text`` without ``--from``."""


def _customer_webhook(
    *, phone_number_id: str, wa_id: str, name: str, message: dict[str, Any]
) -> dict[str, Any]:
    """A real-shaped delivery of one customer message (its ``type`` and body in ``message``) from
    ``wa_id``, with a fresh wamid, timestamped now."""
    wamid = "wamid.SIM" + uuid.uuid4().hex.upper()
    return {
        "object": "whatsapp_business_account",
        "entry": [
            {
                "id": "102000000000001",
                "changes": [
                    {
                        "value": {
                            "messaging_product": "whatsapp",
                            "metadata": {
                                "display_phone_number": "15550100001",
                                "phone_number_id": phone_number_id,
                            },
                            "contacts": [{"profile": {"name": name}, "wa_id": wa_id}],
                            "messages": [
                                {"from": wa_id, "id": wamid, "timestamp": str(int(time.time())), **message}
                            ],
                        },
                        "field": "messages",
                    }
                ],
            }
        ],
    }


def build_text_webhook(
    *, phone_number_id: str, wa_id: str, text: str, name: str = "Simulated Customer"
) -> dict[str, Any]:
    """A real-shaped text delivery (the shape of ``tests/fixtures/payloads/whatsapp/text.json``) timestamped now."""
    return _customer_webhook(
        phone_number_id=phone_number_id,
        wa_id=wa_id,
        name=name,
        message={"type": "text", "text": {"body": text}},
    )


def build_tap_webhook(
    *,
    phone_number_id: str,
    wa_id: str,
    option: dict[str, str],
    in_reply_to: str | None,
    name: str = "Simulated Customer",
) -> dict[str, Any]:
    """A real-shaped tap on a reply button or a list row (the shape of
    ``tests/fixtures/payloads/whatsapp/interactive_button_reply.json``), timestamped now.

    Args:
        option: ``{"id", "title", "kind"}`` as :func:`offered_options` gives it (``kind`` ``button`` or
            ``list``).
        in_reply_to: the wamid of the message that offered it (``context.id``), when known.
    """
    reply = "list_reply" if option.get("kind") == "list" else "button_reply"
    message: dict[str, Any] = {
        "type": "interactive",
        "interactive": {"type": reply, reply: {"id": option["id"], "title": option["title"]}},
    }
    if in_reply_to:
        message["context"] = {"from": "15550100001", "id": in_reply_to}
    return _customer_webhook(phone_number_id=phone_number_id, wa_id=wa_id, name=name, message=message)


def offered_options(record: dict[str, Any]) -> list[dict[str, str]]:
    """The reply buttons and list rows of one message the Graph sandbox recorded, in order:
    ``[{"id", "title", "kind"}]`` (``kind`` ``button`` or ``list``); ``[]`` for any other message."""
    interactive = record.get("interactive") if isinstance(record.get("interactive"), dict) else {}
    action = interactive.get("action") if isinstance(interactive.get("action"), dict) else {}
    options = []
    for button in action.get("buttons") or []:
        reply = button.get("reply") if isinstance(button, dict) else None
        if isinstance(reply, dict) and reply.get("id"):
            options.append({"id": str(reply["id"]), "title": str(reply.get("title") or ""), "kind": "button"})
    for section in action.get("sections") or []:
        for row in (section.get("rows") or []) if isinstance(section, dict) else []:
            if isinstance(row, dict) and row.get("id"):
                options.append({"id": str(row["id"]), "title": str(row.get("title") or ""), "kind": "list"})
    return options


def sent_line(record: dict[str, Any]) -> dict[str, Any]:
    """What ``simulate whatsapp`` prints of one message the Graph sandbox recorded: ``to``, ``type``,
    ``text`` (a text's body, an interactive message's body, a template's name), ``id``,
    ``phone_number_id``, ``reply_to``, and ``buttons`` (``[{"id", "title"}]``, what ``--button ID``
    taps) when it offers any."""
    text = record.get("text")
    interactive = record.get("interactive") if isinstance(record.get("interactive"), dict) else None
    template = record.get("template") if isinstance(record.get("template"), dict) else None
    if text is None and interactive is not None:
        body = interactive.get("body") if isinstance(interactive.get("body"), dict) else {}
        text = body.get("text")
    if text is None and template is not None:
        text = f"template {template.get('name')}"
    line = {
        "to": record.get("to"),
        "type": record.get("type"),
        "text": text,
        "id": record.get("id"),
        "phone_number_id": record.get("phone_number_id"),
        "reply_to": record.get("reply_to"),
    }
    options = offered_options(record)
    if options:
        line["buttons"] = [{"id": o["id"], "title": o["title"]} for o in options]
    return line


def find_offer(records: list[dict[str, Any]], *, wa_id: str, option_id: str) -> tuple[dict[str, str], str]:
    """The newest offer of ``option_id`` among sandbox ``records`` sent to ``wa_id``: ``(option, the
    wamid of the message offering it)``.

    Raises:
        ValueError: no message to ``wa_id`` offers it; names the buttons the newest offer had.
    """
    latest: list[dict[str, str]] = []
    for record in reversed(records):
        if record.get("to") != wa_id:
            continue
        options = offered_options(record)
        for option in options:
            if option["id"] == option_id:
                return option, str(record.get("id") or "")
        latest = latest or options
    offered = ", ".join(f"{o['id']} ({o['title']})" for o in latest)
    raise ValueError(
        f"--button {option_id}: no message sent to +{wa_id} offers it"
        + (f"; the last buttons it was sent: {offered}" if offered else " (it was sent no buttons)")
    )


def retarget_payload(
    body: dict[str, Any], *, phone_number_id: str, keep_timestamps: bool = False
) -> dict[str, Any]:
    """``body`` with every ``metadata.phone_number_id`` set to ``phone_number_id`` and, unless
    ``keep_timestamps``, message/status timestamps moved to now (keeping their relative order)."""
    body = copy.deepcopy(body)
    stamped: list[dict[str, Any]] = []
    for entry in body.get("entry") or []:
        for change in entry.get("changes") or []:
            value = change.get("value") or {}
            if isinstance(value.get("metadata"), dict):
                value["metadata"]["phone_number_id"] = phone_number_id
            for key in ("messages", "statuses", "message_echoes"):
                stamped += [
                    item
                    for item in value.get(key) or []
                    if isinstance(item, dict) and str(item.get("timestamp", "")).isdigit()
                ]
    if stamped and not keep_timestamps:
        newest = max(int(item["timestamp"]) for item in stamped)
        now = int(time.time())
        for item in stamped:
            item["timestamp"] = str(now - (newest - int(item["timestamp"])))
    return body


def phone_digits(option: str, value: str) -> str:
    """A phone number as typed (``+1 555 010 7777``) → its digits (``15550107777``), WhatsApp's ``wa_id``.

    Raises:
        ValueError: not 6 to 15 digits after an optional ``+`` (spaces and dashes allowed), naming
            ``option`` (``--from``).
    """
    digits = re.sub(r"[\s-]", "", value).removeprefix("+")
    if not re.fullmatch(r"[0-9]{6,15}", digits):
        raise ValueError(f"{option} must be a phone number (6 to 15 digits, '+' optional), not {value!r}")
    return digits


_BSUID_KEYS = ("user_id", "from_user_id", "parent_user_id", "from_parent_user_id", "previous_user_id")
"""The keys naming a sender's business-scoped user id (BSUID) in ``messages[]`` (and their ``system``
block) and ``contacts[]``: what :mod:`~switchboard.channels.whatsapp.normalize` finds a customer by
before the phone number."""


def simulated_bsuid(original: str, wa_id: str) -> str:
    """The BSUID ``original`` (``US.10000000000000000001``) stands for when the sender is ``wa_id``: the
    same country prefix, 20 digits derived from both — the same for one number in every payload, another
    for another number, so no two simulated numbers share a user id."""
    prefix = original.rsplit(".", 1)[0] if "." in original else "SIM"
    digest = hashlib.sha256(f"{original}|{wa_id}".encode()).hexdigest()
    return f"{prefix}.{int(digest, 16) % 10**20:020d}"


def with_sender(body: dict[str, Any], wa_id: str) -> dict[str, Any]:
    """``body`` with every customer message sent by ``wa_id`` and nobody else: each ``messages[].from``
    and ``contacts[].wa_id`` is ``wa_id``, and each business-scoped user id of the sender
    (``contacts[].user_id`` / ``parent_user_id``, ``messages[].from_user_id``, a ``system`` block's user
    ids) is replaced by one derived from ``wa_id`` (:func:`simulated_bsuid`), so one payload posted as two
    numbers is two customers (the profile name is kept). Statuses and business-app echoes name the
    business's own sends and are left as they are."""
    body = copy.deepcopy(body)

    def rewrite_ids(item: dict[str, Any]) -> None:
        for key in _BSUID_KEYS:
            if isinstance(item.get(key), str) and item[key]:
                item[key] = simulated_bsuid(item[key], wa_id)

    for entry in body.get("entry") or []:
        for change in entry.get("changes") or []:
            value = change.get("value") or {}
            for message in value.get("messages") or []:
                if not isinstance(message, dict):
                    continue
                if "from" in message:
                    message["from"] = wa_id
                rewrite_ids(message)
                if isinstance(message.get("system"), dict):
                    rewrite_ids(message["system"])
            for contact in value.get("contacts") or []:
                if isinstance(contact, dict):
                    contact["wa_id"] = wa_id
                    rewrite_ids(contact)
    return body


def refresh_message_ids(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with a fresh unique suffix on every ``messages[].id`` / ``message_echoes[].id`` (wamid).

    The webhook stores a message once per (number, wamid), so posting the same file twice would
    otherwise be a duplicate that is never answered again. References to other messages (``context``,
    reactions, statuses of our own sends) are left as they are.
    """
    body = copy.deepcopy(body)
    suffix = ".SIM" + uuid.uuid4().hex[:12].upper()
    for entry in body.get("entry") or []:
        for change in entry.get("changes") or []:
            value = change.get("value") or {}
            for key in ("messages", "message_echoes"):
                for item in value.get(key) or []:
                    if isinstance(item, dict) and isinstance(item.get("id"), str):
                        item["id"] = item["id"] + suffix
    return body


def sample_media_of(body: dict[str, Any]) -> list[tuple[str, bytes, str]]:
    """``(media id, bytes, mime type)`` for every image and audio in ``body``'s messages: what the Graph
    sandbox should serve for them (:data:`~switchboard.cli.channel_common.SAMPLE_MEDIA`), so the demo's
    vision and transcription see something. Other media (video, documents, stickers) stay unknown to the
    sandbox: the agent is told it could not be read."""
    uploads = []
    for entry in body.get("entry") or []:
        for change in (entry.get("changes") or []) if isinstance(entry, dict) else []:
            value = change.get("value") if isinstance(change, dict) else None
            for message in (value or {}).get("messages") or []:
                kind = message.get("type") if isinstance(message, dict) else None
                media = message.get(kind) if kind in ("image", "audio") else None
                if isinstance(media, dict) and media.get("id"):
                    mime = media.get("mime_type") or ("image/jpeg" if kind == "image" else "audio/mp4")
                    uploads.append((str(media["id"]), SAMPLE_MEDIA[kind], mime))
    return uploads


def answerable_messages(body: dict[str, Any]) -> int:
    """How many customer messages in ``body`` the agent answers (not statuses, reactions, stickers,
    edits, revokes, system messages, unsupported types or business-app echoes)."""
    from switchboard.channels.whatsapp.normalize import normalize_delivery

    return sum(1 for message in normalize_delivery(body).messages if message.action == "process")


@channel_app.command("add-whatsapp")
@friendly_errors
def add_whatsapp(
    tenant: Annotated[str, typer.Option(help="Tenant slug or id.")],
    phone_number_id: Annotated[
        str, typer.Option(help="Meta phone_number_id of the business number (digits).")
    ],
    access_token: Annotated[
        str | None,
        typer.Option(
            help="Graph API access token (stored encrypted). Omit for the local sandbox.",
            envvar="WHATSAPP_ACCESS_TOKEN",
        ),
    ] = None,
    display_name: Annotated[str | None, typer.Option(help="Shown in logs and the admin API.")] = None,
    api_base: Annotated[
        str | None,
        typer.Option(
            help="Graph API this number talks to: 'sandbox' (the Graph sandbox in the WhatsApp service), "
            "'real' (WHATSAPP_GRAPH_BASE_URL, default https://graph.facebook.com) or a URL. "
            "Default: 'real' with --access-token, 'sandbox' without. A URL is the operator's choice "
            "(trusted); the console offers tenants only 'sandbox' and 'real'.",
            metavar="sandbox|real|URL",
        ),
    ] = None,
) -> None:
    """Connect a WhatsApp number to a tenant: webhooks whose metadata.phone_number_id matches are routed to it.

    Each number has its own Graph API (--api-base): a real number and the demo's sandbox number work
    side by side in one deployment."""
    if not phone_number_id.isdigit():
        raise ValueError("--phone-number-id must be digits (Meta's phone_number_id)")
    if access_token is not None and not access_token.strip():
        raise ValueError(
            "--access-token is empty: give the Graph API token, or omit it for the local sandbox"
        )
    settings = command_settings()
    base = api_base_option(api_base, has_token=access_token is not None)
    account, created = connect_account(
        settings,
        tenant=tenant,
        channel="whatsapp",
        external_account_id=phone_number_id,
        access_token=access_token,
        display_name=display_name,
        label="phone_number_id",
        api_base_url=base,
    )
    typer.echo(
        f"{'connected' if created else 'updated'} whatsapp number {phone_number_id} id={account.id} "
        f"graph={settings.channel_api_base_url('whatsapp', account.api_base_url)}"
    )
    typer.echo(
        f"webhook URL: https://<your-host>/webhooks/whatsapp (locally {settings.service_url(settings.whatsapp_port)}/webhooks/whatsapp)"
    )


@simulate_app.command("whatsapp")
@friendly_errors
def simulate_whatsapp(
    text: Annotated[
        str | None, typer.Option(help="Text the simulated customer sends (or --payload, not both).")
    ] = None,
    from_: Annotated[
        str | None,
        typer.Option(
            "--from",
            metavar="PHONE",
            help=f"Customer phone number (E.164, '+' optional). With --text: its sender (default "
            f"{SIMULATED_WA_ID}). With --payload: replaces the sender of every customer message in it "
            "(messages[].from and contacts[].wa_id; its business-scoped user ids become ones of this "
            "number, so each number is its own customer); without it the payload's own sender is used.",
        ),
    ] = None,
    payload: Annotated[
        Path | None, typer.Option(help="Raw webhook body (JSON file) to post instead of --text.")
    ] = None,
    button: Annotated[
        str | None,
        typer.Option(
            "--button",
            metavar="ID",
            help='Tap the reply button (or list row) with this id, as printed under "buttons" of a '
            "message the customer (--from) was sent, e.g. the satisfaction question's "
            "csat:<conversation id>:5 (instead of --text or --payload).",
        ),
    ] = None,
    tenant: Annotated[
        str, typer.Option("--tenant", "-t", help="Tenant slug whose WhatsApp number receives it.")
    ] = "demo",
    keep_timestamps: Annotated[
        bool,
        typer.Option(
            help="With --payload only (refused with --text): post its timestamps as they are "
            "(default: moved to now, their order kept). An old "
            "message then falls outside the 24-hour window and gets no free-form reply."
        ),
    ] = False,
    keep_ids: Annotated[
        bool,
        typer.Option(
            help="With --payload only (refused with --text): post its message ids (wamid) as they are "
            "(default: a fresh suffix, so the same file "
            "can be posted again; with the original ids a second post is a duplicate and is not answered)."
        ),
    ] = False,
    timeout: Annotated[
        float,
        typer.Option(
            metavar="SECONDS",
            help="Seconds to wait for the replies (what the Graph API sandbox receives) before saying why "
            "none came.",
        ),
    ] = 30.0,
) -> None:
    """Sign and post a real-shaped webhook to the running WhatsApp service, then print (JSON lines) the
    messages the Graph API sandbox received (to anyone) while waiting: to, type, text, id, and the
    buttons offered (id and title) when a message has any. Exit 0 when the webhook was accepted;
    1 when the service or the sandbox cannot be reached or the webhook was refused; 2 on a bad option or
    a missing file or account.

    --payload message ids get a fresh suffix (unless --keep-ids), so a file can be posted again. When the
    webhook stored nothing new, or the payload holds no customer message to answer (statuses, reactions...),
    it says so in one line and returns at once. --from sets the customer: the sender of a --text
    message, or of every customer message of a --payload (posting one recorded payload as several
    customers); --keep-ids and --keep-timestamps are for --payload and refused with --text.
    --button ID taps a button the customer was sent (found in the sandbox's record of sends to
    --from): how a customer answers the satisfaction question after a conversation closes.
    """
    check_simulate_source(
        text=text,
        payload=payload,
        text_only={},
        payload_only={
            "--keep-ids": (keep_ids, "a --text message always gets a new wamid"),
            "--keep-timestamps": (keep_timestamps, "a --text message is sent now"),
        },
        other_sources={"--button": button},
    )
    wa_id = phone_digits("--from", from_) if from_ is not None else None
    settings = command_settings()
    phone_number_id, sandbox_base = account_of_tenant(
        settings,
        tenant=tenant,
        channel="whatsapp",
        missing=f"tenant {tenant} has no WhatsApp number: run `switchboard channel add-whatsapp`",
    )
    body: dict[str, Any] = {}  # --button: built once the sandbox told what the customer was offered
    if payload is not None:
        try:
            document = json.loads(payload.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{payload} is not a JSON webhook body: {exc}") from None
        body = retarget_payload(document, phone_number_id=phone_number_id, keep_timestamps=keep_timestamps)
        if not keep_ids:
            body = refresh_message_ids(body)
        if wa_id is not None:
            body = with_sender(body, wa_id)
    elif button is None:
        body = build_text_webhook(
            phone_number_id=phone_number_id, wa_id=wa_id or SIMULATED_WA_ID.lstrip("+"), text=text or ""
        )
    webhook_url = settings.service_url(settings.whatsapp_port) + "/webhooks/whatsapp"
    sandbox_url = sandbox_base + "/_control/sent"

    async def tap_body(client: httpx.AsyncClient, control: dict[str, str]) -> dict[str, Any]:
        """The tap on ``--button``: its title and the message offering it read from the sandbox."""
        assert button is not None
        customer = wa_id or SIMULATED_WA_ID.lstrip("+")
        if not is_loopback_url(sandbox_base):
            raise ValueError("--button needs the Graph API sandbox (it reads what the customer was sent)")
        try:
            sent = await client.get(
                sandbox_url, params={"after": 0, "phone_number_id": phone_number_id}, headers=control
            )
            records = sent.json()["messages"]
        except (httpx.HTTPError, ValueError, KeyError):
            raise ValueError(
                f"--button: cannot read the Graph API sandbox at {sandbox_url}; is `switchboard run` running?"
            ) from None
        option, offered_in = find_offer(records, wa_id=customer, option_id=button)
        return build_tap_webhook(
            phone_number_id=phone_number_id, wa_id=customer, option=option, in_reply_to=offered_in
        )

    async def go() -> int:
        control = {
            "Authorization": f"Bearer {settings.secret('admin_token')}"
        }  # the sandbox's control endpoints
        async with httpx.AsyncClient(timeout=10) as client:
            try:
                if not is_loopback_url(
                    sandbox_base
                ):  # a real Graph API: no sandbox, and never the admin token
                    raise KeyError("no sandbox")
                after = (await client.get(sandbox_url, headers=control)).json()["last_seq"]
                for media_id, data, mime in sample_media_of(body):
                    await client.put(
                        f"{sandbox_base}/_control/media/{media_id}",
                        content=data,
                        headers={**control, "Content-Type": mime},
                    )
            except (httpx.HTTPError, ValueError, KeyError):
                after = None
            posted = await tap_body(client, control) if button is not None else body
            raw = json.dumps(posted, separators=(",", ":")).encode()
            posted_at = datetime.now(UTC) - timedelta(seconds=1)  # the outbox rows of this post are newer
            try:
                response = await post_signed(client, webhook_url, raw, settings.secret("meta_app_secret"))
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
            try:
                result = response.json()
            except ValueError:
                result = {}
            if answerable_messages(posted) == 0:
                typer.secho(
                    "accepted, but the payload holds no customer message to answer "
                    "(statuses, reactions, stickers, edits, echoes...): no reply will come",
                    err=True,
                )
                return 0
            if isinstance(result, dict) and result.get("stored") == 0:
                typer.secho(nothing_new_stored(result, keep_ids=keep_ids), err=True)
                return 0
            if after is None:
                typer.secho("no Graph API sandbox reachable: not waiting for replies", err=True)
                return 0
            came = await print_sent(
                client,
                sandbox_url,
                after=after,
                wait_s=timeout,
                headers=control,
                fields=sent_line,
                give_up=no_reply_coming(settings, tenant=tenant, channel="whatsapp", since=posted_at),
            )
            if not came:
                await explain_no_reply(
                    settings,
                    tenant=tenant,
                    channel="whatsapp",
                    since=posted_at,
                    hint=(
                        f"no reply within {timeout:g} s. The message is stored; the worker may have handed the "
                        "conversation to a person (MODE human or waiting in `switchboard conversations list "
                        f"--tenant {tenant}`; the worker's inbound_outcome log line says why), held the number "
                        "back after a throughput error, or still be working (raise --timeout)"
                    ),
                )
            return 0

    raise typer.Exit(asyncio.run(go()))
