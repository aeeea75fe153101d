"""Console: the page a customer's e-mail rating link opens (``/csat/{conversation_id}/{rating}``).

No login: the signed link is the credential (:mod:`switchboard.channels.gmail.csat`), naming one
conversation and one rating. Opening it shows the answer with a button that records it: mail
scanners open every link of a message they check, so a rating is stored by the customer's click on
the page (a form post from the page itself), never by opening the link.
"""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, Response
from sqlmodel import select

from switchboard.api.deps import SessionDep, SettingsDep
from switchboard.channels.gmail.csat import rating_link_is_valid
from switchboard.console.app import console_language, render
from switchboard.console.deps import cross_site_reason
from switchboard.conversations.csat import COMMENT_MAX_CHARS, RATINGS, Rating, record_answer, record_comment
from switchboard.db.models import Conversation, CsatAnswer, Tenant
from switchboard.i18n import gettext
from switchboard.observability import get_logger
from switchboard.tenant_settings import cached_tenant_settings

__all__ = ["csat_pages_router"]

log = get_logger(__name__)

csat_pages_router = APIRouter(include_in_schema=False)
_TITLES = dict(RATINGS)
_HEADERS = {"Referrer-Policy": "same-origin", "Cache-Control": "no-store"}
"""The link's signature is in the address: no other site is sent it, and no cache keeps the page."""


async def _page(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    conversation_id: uuid.UUID,
    rating: int,
    exp: int,
    sig: str,
    *,
    record: bool,
    comment: str = "",
) -> Response:
    """The rating page: refused (403) for a link that is not ours or has expired; the question and
    the answer with an optional comment box and a button to send them; or, once sent (``record``), the
    tenant's thanks."""
    valid = rating in _TITLES and rating_link_is_valid(settings, conversation_id, rating, exp, sig[:128])
    found = (
        (
            await session.exec(
                select(CsatAnswer, Conversation, Tenant)
                .join(Conversation, Conversation.id == CsatAnswer.conversation_id)  # type: ignore[arg-type]
                .join(Tenant, Tenant.id == CsatAnswer.tenant_id)  # type: ignore[arg-type]
                .where(CsatAnswer.conversation_id == conversation_id)
            )
        ).first()
        if valid
        else None
    )
    if found is None:
        return render(request, "csat.html", status_code=403, state="refused", headers=_HEADERS)
    answer, _conversation, tenant = found
    csat = cached_tenant_settings(tenant.settings_extensions, tenant_id=str(tenant.id)).csat
    language = console_language(request)
    context = {
        "business": tenant.name,
        "question": csat.question,
        "exp": exp,
        "sig": sig,
        "answer": gettext(language, _TITLES[rating]),
        "headers": _HEADERS,
        "comment_max": COMMENT_MAX_CHARS,
    }
    if record:
        stored = await record_answer(
            session, tenant_id=tenant.id, customer_id=None, rating=Rating(conversation_id, rating)
        )
        if stored and comment.strip():
            await record_comment(session, tenant_id=tenant.id, conversation_id=conversation_id, text=comment)
        await session.commit()
        log.info("csat_link_answer", conversation_id=str(conversation_id), stored=stored)
        if stored:
            return render(request, "csat.html", state="thanked", thanks=csat.thanks_reply, **context)
    if answer.rating is not None or record:
        return render(request, "csat.html", state="answered", **context)
    return render(request, "csat.html", state="asking", **context)


@csat_pages_router.get("/csat/{conversation_id}/{rating}", response_class=HTMLResponse)
async def csat_open(
    request: Request,
    conversation_id: uuid.UUID,
    rating: int,
    session: SessionDep,
    settings: SettingsDep,
    exp: Annotated[int, Query()] = 0,
    sig: Annotated[str, Query(max_length=128)] = "",
) -> Response:
    """The answer a rating link names, with a button that sends it (opening the link stores nothing)."""
    return await _page(request, session, settings, conversation_id, rating, exp, sig, record=False)


@csat_pages_router.post("/csat/{conversation_id}/{rating}", response_class=HTMLResponse)
async def csat_send(
    request: Request,
    conversation_id: uuid.UUID,
    rating: int,
    session: SessionDep,
    settings: SettingsDep,
    exp: Annotated[int, Form()] = 0,
    sig: Annotated[str, Form(max_length=128)] = "",
    comment: Annotated[str, Form(max_length=4 * COMMENT_MAX_CHARS)] = "",
) -> Response:
    """Store the rating (the first answer of the conversation only) with the customer's optional
    comment (cut to its bound) and thank the customer. A post from another site is refused (403)."""
    if cross_site_reason(request) is not None:
        return render(request, "csat.html", status_code=403, state="refused", headers=_HEADERS)
    return await _page(
        request, session, settings, conversation_id, rating, exp, sig, record=True, comment=comment
    )
