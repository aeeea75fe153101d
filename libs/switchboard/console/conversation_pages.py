"""The conversation page: the thread, what the AI did per turn, and the person's actions.

Every action posts a form (CSRF token included) and runs the same function as its admin API
equivalent (:mod:`switchboard.console.actions`); the page then shows the fresh state.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Annotated, Literal
from urllib.parse import urlencode

import httpx
from fastapi import APIRouter, Depends, Form, HTTPException, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from switchboard.api.access import INBOX_ROLES
from switchboard.api.deps import ResourcesDep, SessionDep, SessionsDep, SettingsDep
from switchboard.console import actions
from switchboard.console.actions import Actioner, ActionRefused
from switchboard.console.app import render
from switchboard.console.deps import PageContext, page_access
from switchboard.console.inbox import conversation_view, mark_read
from switchboard.conversations.notes import NOTE_MAX_CHARS
from switchboard.db.engine import session_scope
from switchboard.db.models import ChannelAccount, Message
from switchboard.feedback import record_feedback
from switchboard.handoff.canned import canned_replies, customer_name, fill_canned
from switchboard.observability import get_logger

__all__ = ["conversation_pages_router"]

log = get_logger(__name__)
conversation_pages_router = APIRouter(include_in_schema=False)
InboxPage = Annotated[PageContext, Depends(page_access(INBOX_ROLES))]


async def _view_or_404(session: SessionDep, page: PageContext, conversation_id: uuid.UUID):  # noqa: ANN202
    view = await conversation_view(session, tenant_id=page.tenant.id, conversation_id=conversation_id)
    if view is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "conversation not found")
    return view


@conversation_pages_router.get("/t/{slug}/conversations/{conversation_id}", response_class=HTMLResponse)
async def conversation_page(
    request: Request, conversation_id: uuid.UUID, page: InboxPage, session: SessionDep
) -> Response:
    view = await _view_or_404(session, page, conversation_id)
    await mark_read(session, tenant_id=page.tenant.id, user_id=page.user.id, conversation_id=conversation_id)
    await session.commit()
    me = page.user.name or page.user.email
    canned = [  # the reply box's "/" picker: filled for this customer and this person
        {"shortcut": r.shortcut, "text": fill_canned(r.text, customer=customer_name(view.customer), agent=me)}
        for r in await canned_replies(session, tenant_id=page.tenant.id)
    ]
    partial = request.headers.get("HX-Request") and request.headers.get("HX-Target") == "conversation"
    return render(
        request,
        "_conversation.html" if partial else "conversation.html",
        tenant=page.tenant,
        view=view,
        active="inbox",
        flash=request.query_params.get("flash"),
        canned=canned,
    )


def _who(page: PageContext) -> Actioner:
    return Actioner(tenant_id=page.tenant.id, user=page.user)


async def _act(
    request: Request,
    page: PageContext,
    conversation_id: uuid.UUID,
    run: Callable[[], Awaitable[str | None]],
    *,
    back_to_inbox: bool = False,
) -> Response:
    """Run one action; back to the conversation page (or the inbox, ``back_to_inbox``; 303, or
    ``HX-Redirect`` for htmx) with what happened."""
    try:
        message = await run()
    except LookupError:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "conversation not found") from None
    except ActionRefused as exc:
        message = str(exc)
        log.info("console_action_refused", conversation_id=str(conversation_id), reason=message)
    target = f"/t/{page.tenant.slug}/" + ("inbox" if back_to_inbox else f"conversations/{conversation_id}")
    if message:
        target += "?" + urlencode({"flash": message})
    if request.headers.get("HX-Request"):
        return Response(status_code=204, headers={"HX-Redirect": target})
    return RedirectResponse(target, status_code=303)


_PLAIN_ACTIONS: dict[str, tuple[Callable[..., Awaitable[str | None]], str]] = {
    "takeover": (
        actions.take_over,
        "You have this conversation now: the AI will not answer until you hand it back.",
    ),
    "handback": (actions.hand_back, "Handed back: the AI answers again."),
    "close": (actions.close, "Closed: the customer's next message opens a new conversation."),
    "reopen": (actions.reopen, ""),
}
"""Actions without a form field: path word → (the action, what the page says after it; empty: what the
action returned)."""


def _plain_action_route(
    act: Callable[..., Awaitable[str | None]], done: str
) -> Callable[..., Awaitable[Response]]:
    async def route(
        request: Request,
        conversation_id: uuid.UUID,
        page: InboxPage,
        sessions: SessionsDep,
        resources: ResourcesDep,
    ) -> Response:
        async def run() -> str | None:
            said = await act(sessions, resources.redis, who=_who(page), conversation_id=conversation_id)
            return done or said

        return await _act(request, page, conversation_id, run)

    return route


for _name, (_act_fn, _done) in _PLAIN_ACTIONS.items():
    conversation_pages_router.add_api_route(
        f"/t/{{slug}}/conversations/{{conversation_id}}/{_name}",
        _plain_action_route(_act_fn, _done),
        methods=["POST"],
        name=f"{_name}_action",
    )


@conversation_pages_router.post("/t/{slug}/conversations/{conversation_id}/reply")
async def reply_action(
    request: Request,
    conversation_id: uuid.UUID,
    page: InboxPage,
    sessions: SessionsDep,
    resources: ResourcesDep,
    text: Annotated[str, Form(max_length=actions.REPLY_MAX_CHARS * 2)],
) -> Response:
    async def run() -> str | None:
        await actions.reply(
            sessions, resources.redis, who=_who(page), conversation_id=conversation_id, text=text
        )
        return None

    return await _act(request, page, conversation_id, run)


@conversation_pages_router.post("/t/{slug}/conversations/{conversation_id}/note")
async def note_action(
    request: Request,
    conversation_id: uuid.UUID,
    page: InboxPage,
    sessions: SessionsDep,
    resources: ResourcesDep,
    text: Annotated[str, Form(max_length=NOTE_MAX_CHARS * 2)],
) -> Response:
    """A private note for the team (shown in the thread; never sent, never read by the model)."""

    async def run() -> str | None:
        return await actions.note(
            sessions, resources.redis, who=_who(page), conversation_id=conversation_id, text=text
        )

    return await _act(request, page, conversation_id, run)


@conversation_pages_router.post("/t/{slug}/conversations/{conversation_id}/transfer")
@conversation_pages_router.post("/t/{slug}/conversations/{conversation_id}/assign")
async def transfer_action(
    request: Request,
    conversation_id: uuid.UUID,
    page: InboxPage,
    sessions: SessionsDep,
    resources: ResourcesDep,
    to: Annotated[str, Form(max_length=80)],
    back: Annotated[str, Form(max_length=10)] = "",
) -> Response:
    """Give the conversation to a console user or a WhatsApp agent (who is told on WhatsApp), whoever
    has it now (the AI, the queue, a person); from the conversation page or an inbox row (``back=inbox``)."""

    async def run() -> str | None:
        return await actions.transfer(
            sessions, resources.redis, who=_who(page), conversation_id=conversation_id, to=to
        )

    return await _act(request, page, conversation_id, run, back_to_inbox=back == "inbox")


@conversation_pages_router.post("/t/{slug}/conversations/{conversation_id}/approvals/{action_id}")
async def decide_action(
    request: Request,
    conversation_id: uuid.UUID,
    action_id: uuid.UUID,
    page: InboxPage,
    sessions: SessionsDep,
    resources: ResourcesDep,
    decision: Annotated[Literal["approve", "reject"], Form()],
    reason: Annotated[str, Form(max_length=500)] = "",
) -> Response:
    async def run() -> str | None:
        return await actions.decide(
            sessions,
            resources.redis,
            who=_who(page),
            conversation_id=conversation_id,
            action_id=action_id,
            approve=decision == "approve",
            reason=reason,
        )

    return await _act(request, page, conversation_id, run)


@conversation_pages_router.post("/t/{slug}/messages/{message_id}/feedback")
async def feedback_action(
    request: Request,
    message_id: uuid.UUID,
    page: InboxPage,
    sessions: SessionsDep,
    rating: Annotated[Literal["up", "down"], Form()],
    comment: Annotated[str, Form(max_length=2000)] = "",
) -> Response:
    """👍/👎 on an AI answer, joined to its trace by the feedback module.

    Stored by :func:`switchboard.feedback.record_feedback` (one rating per message and console user;
    joined to the turn and trace that wrote the message).
    """
    async with sessions() as session:
        message = await session.get(Message, message_id)
        if message is None or message.tenant_id != page.tenant.id or message.conversation_id is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, "message not found")
        conversation_id = message.conversation_id
    async with session_scope(sessions) as session:
        await record_feedback(
            session,
            tenant_id=page.tenant.id,
            message_id=message_id,
            rating=rating,
            comment=comment.strip() or None,
            source=f"console_user:{page.user.id}",
        )

    async def run() -> str | None:
        return "Thanks: your rating was recorded."

    return await _act(request, page, conversation_id, run)


_INLINE_MIME = ("image/jpeg", "image/png", "image/gif", "image/webp", "audio/", "video/")
"""Media shown in the page itself; anything else (PDF, documents, SVG, HTML...) is downloaded."""


@conversation_pages_router.get("/t/{slug}/messages/{message_id}/media/{index}")
async def media_action(
    message_id: uuid.UUID, index: int, page: InboxPage, sessions: SessionsDep, settings: SettingsDep
) -> Response:
    """The bytes of one media item of a message, fetched the channel's way (WhatsApp: the Graph media
    URL with the account's token; Instagram: our stored copy), for the conversation page.

    Served with ``X-Content-Type-Options: nosniff`` and a sandboxing CSP; only images, audio and video
    are inline, everything else is an attachment (a customer's file never runs in the console's origin).
    """
    from switchboard.channels.base import ChannelDeps, build_channels
    from switchboard.crypto import CredentialCipher
    from switchboard.inbound.media import MAX_MEDIA_BYTES, MediaUnavailable
    from switchboard.media import MediaStore

    async with sessions() as session:
        message = await session.get(Message, message_id)
        if (
            message is None
            or message.tenant_id != page.tenant.id
            or not 0 <= index < len(message.media or [])
        ):
            raise HTTPException(status.HTTP_404_NOT_FOUND, "media not found")
        entry = message.media[index]
        account = (
            await session.get(ChannelAccount, message.channel_account_id)
            if message.channel_account_id
            else None
        )
    if account is None or not entry.get("ref"):
        raise HTTPException(status.HTTP_404_NOT_FOUND, "media not found")
    cipher = CredentialCipher(settings.secret("encryption_key").encode())
    async with httpx.AsyncClient(timeout=30.0) as http:
        deps = ChannelDeps(
            settings=settings,
            cipher=cipher,
            http=http,
            sessions=sessions,
            extra={"media_store": MediaStore.from_settings(settings)},
        )
        channel = build_channels(deps).get(message.channel)
        if channel is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, "media not found")
        try:
            data, mime = await channel.fetch_media(account, str(entry["ref"]), max_bytes=MAX_MEDIA_BYTES)
        except MediaUnavailable as exc:
            log.info("console_media_unavailable", message_id=str(message_id), error=str(exc)[:200])
            raise HTTPException(
                status.HTTP_502_BAD_GATEWAY, "The channel did not give the media back."
            ) from None
    mime = (mime or entry.get("mime") or "application/octet-stream").split(";")[0].strip().lower()
    inline = mime.startswith(_INLINE_MIME)
    filename = str(entry.get("filename") or f"media-{index}").replace('"', "")
    headers = {
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "sandbox; default-src 'none'",
        "Cache-Control": "private, max-age=300",
        "Content-Disposition": f'{"inline" if inline else "attachment"}; filename="{filename}"',
    }
    return Response(data, media_type=mime if inline else "application/octet-stream", headers=headers)
