"""What every channel's CLI does the same way (:mod:`switchboard.channels.whatsapp.cli`,
:mod:`switchboard.channels.instagram.cli`, :mod:`switchboard.channels.gmail.cli`): check a simulate
command's options, connect an account with an encrypted token, find a tenant's account, and watch a
provider sandbox for what the system sent after a simulated webhook."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import typer

from switchboard.settings import Settings

__all__ = [
    "SAMPLE_MEDIA",
    "check_simulate_source",
    "nothing_new_stored",
    "connect_account",
    "account_of_tenant",
    "print_sent",
    "is_loopback_url",
    "explain_no_reply",
    "no_reply_coming",
]

SAMPLE_MEDIA = {
    "image": base64.b64decode(
        "/9j/4AAQSkZJRgABAQAAAQABAAD/4gHYSUNDX1BST0ZJTEUAAQEAAAHIAAAAAAQwAABtbnRyUkdCIFhZWiAH4AABAAEAAAAAAABh"
        "Y3NwAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAQAA9tYAAQAAAADTLQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
        "AAAAAAAAAAAAAAAAAAAAAAAAAAlkZXNjAAAA8AAAACRyWFlaAAABFAAAABRnWFlaAAABKAAAABRiWFlaAAABPAAAABR3dHB0AAAB"
        "UAAAABRyVFJDAAABZAAAAChnVFJDAAABZAAAAChiVFJDAAABZAAAAChjcHJ0AAABjAAAADxtbHVjAAAAAAAAAAEAAAAMZW5VUwAA"
        "AAgAAAAcAHMAUgBHAEJYWVogAAAAAAAAb6IAADj1AAADkFhZWiAAAAAAAABimQAAt4UAABjaWFlaIAAAAAAAACSgAAAPhAAAts9Y"
        "WVogAAAAAAAA9tYAAQAAAADTLXBhcmEAAAAAAAQAAAACZmYAAPKnAAANWQAAE9AAAApbAAAAAAAAAABtbHVjAAAAAAAAAAEAAAAM"
        "ZW5VUwAAACAAAAAcAEcAbwBvAGcAbABlACAASQBuAGMALgAgADIAMAAxADb/2wBDAAYEBQYFBAYGBQYHBwYIChAKCgkJChQODwwQ"
        "FxQYGBcUFhYaHSUfGhsjHBYWICwgIyYnKSopGR8tMC0oMCUoKSj/2wBDAQcHBwoIChMKChMoGhYaKCgoKCgoKCgoKCgoKCgoKCgo"
        "KCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCj/wAARCABAAGADASIAAhEBAxEB/8QAGwABAAIDAQEAAAAAAAAAAAAAAAQI"
        "AwYHAQX/xAA2EAABBAAEAgUJCQEAAAAAAAAAAQIDBAUGERMHURIUIaGxIjEyQWFyc4HRCCMzQlJxkZLwsv/EABoBAQACAwEAAAAA"
        "AAAAAAAAAAADBQEEBgL/xAApEQACAgECAwcFAAAAAAAAAAAAAQIDBAUREiFBBjFCUWFxwRMiMjOR/9oADAMBAAIRAxEAPwCzYAMm"
        "AAAAAAAAAAAAAAAAeKqImqroh6c2493erZHbXRe21ZZGqexNXeLUJ8Wh5F0ak9t2R2z+nBz8jfJ8Uw+v+PeqRe/M1vip8+fN+XIN"
        "dzHcMRU9SWWKv8IpUgHTx7NV+Kx/wrHqUukS08/EbKUGvTxqBfcY9/gimyYdeq4lSit0J47FaVNWSRrqi/7kU0NjyZnDFMp3NyhJ"
        "06z11lrPXyJPovtTv8x5yOzkVDeiT4vXqZr1F8X3rkWxBreTM4YXmylu0JOhZYn3taRfLj+qe1O7zGyHL2VTqk4TWzRaRkpreL5A"
        "AEZ6AAABxD7Rl3WzgtFq+gySdyfuqIn/AC47eVu47zSy5+kZKxzWRV4mRqv5m6K7VPm5yfJS50GvjzE/JN/HyaWfLalrzOeAA7so"
        "wAACTh161ht2K3Qnkr2Yl1ZIxdFT/cjeqfF/NNfTdkp2fiwImv8AVWnPAa92LTf+2Cfuj3C2cPxex1+nxwvN067g1aXntTOj8Ucf"
        "cp8bcIfp1zC70Pw1ZJ4q04IDRnomHPwbezZPHNuXUtBgfEzLWMXYKde1LFZncjI2TRK3pOXzJr2p3m6FL6ySusRJWR6zq9EjRnpK"
        "7Xs009epcqnu9Ug6zpv9Bu5p+rTt7zm9Y06vCcXW+T37/QssPJlcnxLuMxnjma1iIqLqhgBSm6Sd9vJw328nEYAEnfbycN9vJxGA"
        "BJ328nDfbycRgASd9vJw328nEYAEnfbycRgAD//Z"
    ),
    "audio": b"\x00\x00\x00\x18ftypM4A \x00\x00\x00\x00M4A isom"
    + b"SWITCHBOARD-TRANSCRIPT: is the blue one back?\x00",
}
"""What ``simulate instagram|whatsapp --payload`` serves behind the payload's media (its CDN links and
media ids are fake and the demo is offline): a 96×64 JPEG of a blue sneaker, and an M4A header with the offline model server's
transcript marker (``standins.offline_server.TRANSCRIPT_MARKER``), which it returns as the transcript."""


GIVE_UP_EVERY_S = 2.0
"""How often a simulate command that saw no reply yet checks whether one can still come (seconds)."""


def check_simulate_source(
    *,
    text: str | None,
    payload: object | None,
    text_only: dict[str, tuple[object | None, str]],
    payload_only: dict[str, tuple[bool, str]] | None = None,
    other_sources: dict[str, object | None] | None = None,
) -> None:
    """Check what a ``simulate whatsapp|instagram|gmail`` command is asked to post: exactly one of
    ``--text`` or ``--payload``, and with ``--payload`` none of the options that only shape a ``--text``
    message (``--from``...): a payload names its own sender, and silently posting it as someone other
    than the user named is worse than saying so.

    Args:
        text: ``--text`` (``None``: not given).
        payload: ``--payload`` (``None``: not given).
        text_only: option name (``"--from"``) -> ``(its value, None when not given; why a payload
            does not need it)``, e.g. ``{"--from": (from_, "the payload names its sender")}``.
        payload_only: the reverse, flags that only change how a ``--payload`` file is posted
            (``"--keep-ids"`` -> ``(given, why a --text message has no use for it)``).
        other_sources: more ways of saying what the customer sends, besides ``--text`` and ``--payload``
            (``{"--button": button}``): exactly one of all of them is given.

    Raises:
        ValueError: both or neither of ``--text`` / ``--payload``, or a ``text_only`` option given with
            ``--payload`` (``"--from cannot be combined with --payload: the payload names its sender"``),
            a ``payload_only`` flag with ``--text`` (``"--keep-ids only applies to --payload: ..."``), or
            a ``--payload`` file that does not exist (``"FILE: no such file"``);
            the command's error wrapper makes it one line on stderr and exit status 2.
    """
    sources = {"--text": text, "--payload": payload, **(other_sources or {})}
    if sum(value is not None for value in sources.values()) != 1:
        names = list(sources)
        raise ValueError(f"give exactly one of {', '.join(names[:-1])} or {names[-1]}")
    if payload is not None:
        for option, (value, why) in text_only.items():
            if value is not None:
                raise ValueError(f"{option} cannot be combined with --payload: {why}")
    else:
        for option, (given, why) in (payload_only or {}).items():
            if given:
                raise ValueError(f"{option} only applies to --payload: {why}")
    if isinstance(payload, Path) and not payload.is_file():  # before the database: the first thing wrong
        raise ValueError(f"{payload}: no such file")


def connect_account(
    settings: Settings,
    *,
    tenant: str,
    channel: str,
    external_account_id: str,
    access_token: str | None,
    display_name: str | None,
    label: str,
    api_base_url: str | None = None,
) -> tuple[Any, bool]:
    """Connect ``external_account_id`` of ``channel`` to ``tenant`` (or update it: token, name, active,
    and the API root when ``api_base_url`` is given: ``sandbox``, a URL, or ``""`` for the real API).

    Returns:
        ``(ChannelAccount, created)``.

    Raises:
        AccountTaken: the account belongs to another tenant (``label`` names it in the message).
    """
    from switchboard.channels.accounts import connect_channel_account
    from switchboard.cli.runner import run_in_session  # here: switchboard.cli imports the channel CLIs
    from switchboard.crypto import CredentialCipher
    from switchboard.tenants import get_tenant

    cipher = CredentialCipher(settings.secret("encryption_key").encode())

    async def work(session):  # type: ignore[no-untyped-def]
        return await connect_channel_account(
            session,
            tenant=await get_tenant(session, tenant),
            channel=channel,
            external_account_id=external_account_id,
            access_token=access_token,
            display_name=display_name,
            cipher=cipher,
            api_base_url=api_base_url,
            label=label,
        )

    connected: tuple[Any, bool] = run_in_session(work, settings=settings)
    return connected


def account_of_tenant(settings: Settings, *, tenant: str, channel: str, missing: str) -> tuple[str, str]:
    """The provider's id of ``tenant``'s first ``channel`` account and the API root it talks to
    (:meth:`~switchboard.settings.Settings.channel_api_base_url`: the sandbox, or the real API).

    Raises:
        ValueError: the tenant has none (``missing`` is the message).
    """
    from sqlmodel import select

    from switchboard.cli.runner import run_in_session
    from switchboard.db.models import ChannelAccount
    from switchboard.tenants import get_tenant

    async def find(session):  # type: ignore[no-untyped-def]
        owner = await get_tenant(session, tenant)
        account = (
            await session.exec(
                select(ChannelAccount).where(
                    ChannelAccount.tenant_id == owner.id, ChannelAccount.channel == channel
                )
            )
        ).first()
        if account is None:
            raise ValueError(missing)
        return account.external_account_id, settings.channel_api_base_url(channel, account.api_base_url)

    found: tuple[str, str] = run_in_session(find, settings=settings)
    return found


async def print_sent(
    client: httpx.AsyncClient,
    sent_url: str,
    *,
    after: int,
    wait_s: float,
    fields: Sequence[str] | Callable[[dict[str, Any]], dict[str, Any]],
    headers: dict[str, str] | None = None,
    give_up: Callable[[], Awaitable[bool]] | None = None,
) -> bool:
    """Print (JSON lines) what the sandbox at ``sent_url`` records after ``after``, until ``wait_s``
    seconds pass or 3 s go by without anything new. Returns whether anything came.

    Args:
        fields: the keys of each record to print, or a function making the printed object of a record
            (a channel that shows its buttons).
        headers: sent with each poll (a sandbox whose control endpoints need the admin token).
        give_up: asked every :data:`GIVE_UP_EVERY_S` while nothing came; ``True`` stops waiting (a send
            that failed for good: no reply will come).

    Raises:
        typer.Exit: (1) the sandbox stopped answering while we waited, after one line on stderr.
    """
    deadline = time.monotonic() + wait_s
    last_new = None
    next_check = time.monotonic() + GIVE_UP_EVERY_S
    while time.monotonic() < deadline:
        await asyncio.sleep(0.25)
        if give_up is not None and last_new is None and time.monotonic() >= next_check:
            if await give_up():
                break
            next_check = time.monotonic() + GIVE_UP_EVERY_S
        try:
            messages = (await client.get(sent_url, params={"after": after}, headers=headers)).json()[
                "messages"
            ]
        except httpx.TransportError as exc:  # the system went away while we waited (Ctrl-C on `run`)
            typer.secho(
                f"error: lost the sandbox at {sent_url} while waiting for replies ({type(exc).__name__}); "
                "is `switchboard run` still running?",
                fg=typer.colors.RED,
                err=True,
            )
            raise typer.Exit(1) from None
        for message in messages:
            shown = fields(message) if callable(fields) else {k: message.get(k) for k in fields}
            typer.echo(json.dumps(shown, ensure_ascii=False))
            after = message["seq"]
            last_new = time.monotonic()
        if last_new is not None and time.monotonic() - last_new > 3.0:
            break
    return last_new is not None


def nothing_new_stored(result: dict[str, Any], *, keep_ids: bool) -> str:
    """The line a ``simulate whatsapp|instagram`` command prints when its webhook stored nothing new
    (``result``: the service's answer, ``{"stored": 0, "duplicates": N, ...}``)."""
    hint = " (drop --keep-ids to post fresh message ids)" if keep_ids else ""
    duplicates = result.get("duplicates", 0)
    return f"nothing new stored ({duplicates} duplicate(s): already received): no reply will come{hint}"


def is_loopback_url(url: str) -> bool:
    """Whether ``url`` points at this machine (a sandbox), so the admin token may be sent to it; a real
    provider URL (``https://graph.facebook.com``...) never gets it."""
    from urllib.parse import urlsplit

    return (urlsplit(url).hostname or "") in ("127.0.0.1", "localhost", "::1")


def reply_state(settings: Settings, *, tenant: str, channel: str, since: datetime) -> dict[str, Any]:
    """What the database says about the replies to ``tenant``'s messages on ``channel`` since ``since``
    (UTC), for a simulate command that saw no reply (one read, one short transaction).

    Returns:
        ``{"unsent": [...], "with_person": [...]}``: ``unsent`` the outbox parts not sent (``failed``, or
        ``pending``/``sending``: being retried), oldest first, each ``{"status", "recipient",
        "error_code", "error_message", "attempts"}``; ``with_person`` the conversations of those
        messages that a person has (``status == "human"``), each ``{"id", "queued", "assigned"}``
        (``queued``: waiting, nobody from the team took it yet). At most 10 of each.
    """
    from sqlmodel import col, select

    from switchboard.cli.runner import run_in_session  # here: switchboard.cli imports the channel CLIs
    from switchboard.db.models import Conversation, ConversationStatus, Message, Outbox, OutboxStatus
    from switchboard.tenants import get_tenant

    unsent = (OutboxStatus.failed.value, OutboxStatus.pending.value, OutboxStatus.sending.value)

    async def find(session):  # type: ignore[no-untyped-def]
        owner = await get_tenant(session, tenant)
        parts = await session.exec(
            select(Outbox)
            .where(Outbox.tenant_id == owner.id, Outbox.channel == channel, Outbox.created_at >= since)
            .where(col(Outbox.status).in_(unsent))
            .order_by(col(Outbox.created_at))
            .limit(10)
        )
        people = await session.exec(
            select(Conversation)
            .where(Conversation.tenant_id == owner.id, Conversation.status == ConversationStatus.human.value)
            .where(
                col(Conversation.id).in_(
                    select(Message.conversation_id).where(
                        Message.tenant_id == owner.id,
                        Message.channel == channel,
                        Message.direction == "inbound",
                        Message.created_at >= since,
                    )
                )
            )
            .limit(10)
        )
        return {
            "unsent": [
                {
                    "status": row.status,
                    "recipient": row.recipient,
                    "error_code": row.error_code,
                    "error_message": row.error_message,
                    "attempts": row.attempts,
                }
                for row in parts
            ],
            "with_person": [
                {
                    "id": str(row.id),
                    "queued": row.assigned_agent_id is None and row.assigned_user_id is None,
                    "assigned": row.assigned_agent_id is not None or row.assigned_user_id is not None,
                }
                for row in people
            ],
        }

    return run_in_session(find, settings=settings)


def send_failed_for_good(state: dict[str, Any]) -> bool:
    """Whether a :func:`reply_state` shows a failed send and nothing still being sent: no reply will come,
    so a simulate command stops waiting."""
    statuses = {part["status"] for part in state["unsent"]}
    return "failed" in statuses and statuses <= {"failed"}


async def read_reply_state(
    settings: Settings, *, tenant: str, channel: str, since: datetime
) -> dict[str, Any] | None:
    """:func:`reply_state` off the event loop; ``None`` (and a note on stderr) when the database cannot be
    read (a hint only: the command's result does not depend on it)."""
    try:
        return await asyncio.to_thread(reply_state, settings, tenant=tenant, channel=channel, since=since)
    except Exception as exc:  # noqa: BLE001 (see above)
        typer.secho(f"(could not read the outbox: {type(exc).__name__})", err=True)
        return None


def no_reply_coming(
    settings: Settings, *, tenant: str, channel: str, since: datetime
) -> Callable[[], Awaitable[bool]]:
    """``print_sent``'s ``give_up`` for a simulate command: whether a send since ``since`` failed for good."""

    async def check() -> bool:
        state = await read_reply_state(settings, tenant=tenant, channel=channel, since=since)
        return state is not None and send_failed_for_good(state)

    return check


_REFUSALS = ("window_closed", "agent_window_closed")
"""``outbox.error_code`` of a row the delivery refused before any send (``outbox.policy.Refusal``)."""


def failed_send_line(part: dict[str, Any]) -> str:
    """One line for a reply whose send failed for good (``reply_state``'s ``unsent`` entry).

    A row the channel's service window refused was never sent (0 attempts), and retrying it fails the
    same way until the customer writes again, so it gets that advice instead of "retry it".
    """
    head = (
        f"a reply to {part['recipient']} was written but its send failed: {part['error_code'] or 'error'}"
        f" {part['error_message'] or ''}"
    ).rstrip()
    if part["error_code"] in _REFUSALS:
        return head + (
            " (not sent: refused before any attempt). A retry fails the same way until the window opens "
            "again: the customer (or, for an agent, the agent) writes to the business first."
        )
    attempts = part["attempts"]
    return head + (
        f" (after {attempts} attempt{'s' if attempts != 1 else ''}). Fix the cause, then retry it from the "
        "console's Platform page (failed sends; a platform admin's page: `switchboard users add EMAIL "
        "--role platform_admin --generate`)."
    )


async def explain_no_reply(
    settings: Settings, *, tenant: str, channel: str, since: datetime, hint: str
) -> None:
    """After a simulated message got no reply: print why when the database knows (a reply written but its
    send failed, a send being retried, the conversation with a person), else ``hint`` (the channel's
    likely causes). Stderr."""
    state = await read_reply_state(settings, tenant=tenant, channel=channel, since=since)
    parts = state["unsent"] if state else []
    people = state["with_person"] if state else []
    failed = [part for part in parts if part["status"] == "failed"]
    retrying = [part for part in parts if part["status"] != "failed"]
    for part in failed:
        typer.secho(failed_send_line(part), fg=typer.colors.YELLOW, err=True)
    for part in retrying:
        typer.secho(
            f"a reply to {part['recipient']} is written and its send is being retried ({part['status']}, "
            f"{part['attempts']} attempt{'s' if part['attempts'] != 1 else ''} so far: the worker's delivery_retry log line says why); "
            "raise --timeout to wait for it",
            err=True,
        )
    for person in people:
        where = (
            "waiting in the queue for a person (nobody from the team took it yet)"
            if person["queued"]
            else "with a person from the team"
        )
        typer.secho(
            f"conversation {person['id']} is {where}: the AI does not answer it (human mode). See "
            f"`switchboard conversations show --tenant {tenant} {person['id']}`; hand it back to the AI from "
            "the console's conversation page, or write as another customer (--from).",
            err=True,
        )
    if not parts and not people:
        typer.secho(hint, err=True)
