"""Console: the People page of a tenant (admins), and the invitation link's set-password page.

* **Console users** (``/t/{slug}/people``): invite by e-mail with a role (admin or agent): the link is
  shown once to copy, and e-mailed when an SMTP server is configured (``SMTP_HOST``); resend (a new
  link, the old one stops working), withdraw, deactivate and reactivate
  (:mod:`switchboard.users.invites`).
* **Human agents** (the people who answer from their own WhatsApp): add (name and number, checked with
  phonenumbers), remove, set online or offline (:mod:`switchboard.handoff`, as ``switchboard agents``).
* **Teams** (named groups of human agents, an agent may be in several): create, rename, delete, add and
  remove members (:mod:`switchboard.handoff.teams`); a conversation given to a team goes to its online
  agents only.
* **Invitation link** (``/invite/{token}``, no session): the set-password form; a link that expired,
  was used, withdrawn or replaced says so. Accepting signs the person in.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, HTTPException, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlmodel import col, select

from switchboard.api.access import ADMIN_ROLES
from switchboard.api.deps import SessionDep, SessionsDep, SettingsDep
from switchboard.console.app import console_language, register_nav, render
from switchboard.console.deps import PageContext, cross_site_reason, page_access
from switchboard.conversations.lifecycle import Actor
from switchboard.db.models import ConsoleUser, HumanAgent, Role, Tenant, utcnow
from switchboard.handoff import (
    AgentBusy,
    AgentExists,
    AgentNotFound,
    CommandError,
    add_agent,
    list_agents,
    remove_agent,
    set_status,
    write_outgoing,
)
from switchboard.handoff.teams import (
    TeamExists,
    TeamNotFound,
    create_team,
    delete_team,
    list_teams,
    rename_team,
    set_member,
)
from switchboard.i18n import N_, gettext
from switchboard.observability import get_logger
from switchboard.settings import Settings
from switchboard.users import (
    MIN_PASSWORD_CHARS,
    SESSION_COOKIE,
    CannotDeactivateSelf,
    InviteNotFound,
    InviteRefused,
    IssuedInvite,
    UserExists,
    UserNotFound,
    WeakPassword,
    accept_invite,
    create_invite,
    invite_for_token,
    pending_invites,
    resend_invite,
    revoke_invite,
    set_user_active,
    start_session,
)
from switchboard.users.mail import MailNotSent, invite_message, send_mail

__all__ = ["people_pages_router", "issue_invite_link", "invite_link"]

log = get_logger(__name__)
people_pages_router = APIRouter(include_in_schema=False)
AdminPage = Annotated[PageContext, Depends(page_access(ADMIN_ROLES))]
register_nav("people", N_("People"), "/people", ADMIN_ROLES)

_WORDS = (N_("online"), N_("offline"))
"""Agent states the templates translate."""
INVITED = N_("Invitation ready for %(email)s.")
MAILED = N_("It was e-mailed to them.")
NOT_MAILED = N_("It was not e-mailed (no mail server is set up): copy the link below and send it yourself.")
MAIL_FAILED = N_("The e-mail could not be sent: copy the link below and send it yourself.")
WITHDRAWN = N_("Invitation for %(email)s withdrawn: its link no longer works.")
DEACTIVATED = N_("%(email)s can no longer sign in.")
REACTIVATED = N_("%(email)s can sign in again.")
AGENT_ADDED = N_("%(name)s was added.")
AGENT_REMOVED = N_("%(name)s was removed.")
AGENT_ONLINE = N_("%(name)s is online: %(n)s waiting conversation(s) went to them.")
AGENT_OFFLINE = N_("%(name)s is offline.")
ALREADY_USER = N_("Somebody already signs in with %(email)s.")
NOT_AN_EMAIL = N_("That is not an e-mail address.")
BAD_PHONE = N_("That is not a valid phone number. Write it with the country code, for example +15550102030.")
PHONE_TAKEN = N_("An agent with that number exists already.")
NAME_MISSING = N_("Give the agent's name.")
AGENT_STILL_BUSY = N_(
    "%(name)s still has %(n)s open conversation(s): hand them back to the AI or transfer them first."
)
TEAM_CREATED = N_("The team %(name)s was created.")
TEAM_RENAMED = N_("The team is now called %(name)s.")
TEAM_DELETED = N_("The team %(name)s was deleted: its conversations can go to any agent.")
TEAM_MEMBER_ADDED = N_("%(agent)s is in the team %(name)s now.")
TEAM_MEMBER_REMOVED = N_("%(agent)s left the team %(name)s.")
TEAM_NAME_TAKEN = N_("There is a team called %(name)s already.")
TEAM_NAME_BAD = N_("Give the team a name of at most 100 characters.")
SELF = N_("You cannot deactivate your own account.")
PASSWORDS_DIFFER = N_("The two passwords differ.")
WEAK = N_("Choose another password: %(reason)s.")
_WEAK_REASONS = {
    f"the password needs at least {MIN_PASSWORD_CHARS} characters": N_(
        "the password needs at least %(n)s characters"
    ),
    "this password is on the list of commonly used passwords: choose a longer, less common one (a few "
    "unrelated words work well)": N_(
        "this password is on the list of commonly used passwords: choose a longer, less common one (a few "
        "unrelated words work well)"
    ),
    "the password may not be your e-mail address or the product's name": N_(
        "the password may not be your e-mail address or the product's name"
    ),
}
"""The password policy's refusals (:mod:`switchboard.password_policy`) as msgids, to say them in the
page's language."""


def weak_password_reason(exc: WeakPassword, language: str) -> str:
    """Why the password was refused, in ``language`` (the policy's own words when not in the catalog)."""
    msgid = _WEAK_REASONS.get(str(exc))
    if msgid is None:
        return str(exc)
    return (
        gettext(language, msgid) % {"n": MIN_PASSWORD_CHARS} if "%(n)s" in msgid else gettext(language, msgid)
    )


def invite_link(settings: Settings, request: Request, path: str) -> str:
    """The full invitation URL: ``console_public_url`` (else the address this request came to) + path."""
    base = settings.console_public_url or str(request.base_url)
    return base.rstrip("/") + path


async def issue_invite_link(
    request: Request, settings: Settings, issued: IssuedInvite, *, tenant: Tenant, inviter: str, language: str
) -> dict[str, Any]:
    """The link of a new invitation, e-mailed when ``SMTP_HOST`` is set; what the page shows about it:
    ``{"email", "link", "mailed", "mail_error"}``."""
    link = invite_link(settings, request, issued.path)
    shown: dict[str, Any] = {"email": issued.invite.email, "link": link, "mailed": False, "mail_error": None}
    if settings.smtp_enabled:
        message = invite_message(
            settings,
            language=language,
            to=issued.invite.email,
            tenant_name=tenant.name,
            inviter=inviter,
            link=link,
            expires_at=issued.invite.expires_at,
        )
        try:
            await send_mail(settings, message)
            shown["mailed"] = True
        except MailNotSent as exc:
            shown["mail_error"] = str(exc)
    return shown


async def _people_page(
    request: Request,
    page: PageContext,
    session: Any,
    *,
    code: int = 200,
    message: str | None = None,
    error: str | None = None,
    new_link: dict[str, Any] | None = None,
    form: dict[str, str] | None = None,
) -> Response:
    agents = await list_agents(session, tenant_id=page.tenant.id)
    users = (
        await session.exec(
            select(ConsoleUser)
            .where(col(ConsoleUser.tenant_id) == page.tenant.id)
            .order_by(col(ConsoleUser.email))
        )
    ).all()
    invites = await pending_invites(session, tenant_id=page.tenant.id)
    return render(
        request,
        "people.html",
        status_code=code,
        tenant=page.tenant,
        agents=agents,
        teams=await list_teams(session, tenant_id=page.tenant.id),
        users=users,
        invites=invites,
        now=utcnow(),
        message=message,
        error=error,
        new_link=new_link,
        form=form or {},
        active="people",
    )


def _say(request: Request, page: PageContext, msgid: str, **values: Any) -> str:
    text = gettext(console_language(request, page.tenant), msgid)
    return text % values if values else text


@people_pages_router.get("/t/{slug}/people", response_class=HTMLResponse)
async def people_page(request: Request, page: AdminPage, session: SessionDep) -> Response:
    """Console users, invitations waiting, human agents; the forms to change them."""
    return await _people_page(request, page, session)


@people_pages_router.post("/t/{slug}/people/invites", response_class=HTMLResponse)
async def people_invite(
    request: Request,
    page: AdminPage,
    session: SessionDep,
    settings: SettingsDep,
    email: Annotated[str, Form(max_length=320)],
    role: Annotated[str, Form(max_length=16)] = Role.agent.value,
    name: Annotated[str, Form(max_length=200)] = "",
) -> Response:
    """Invite ``email`` as ``role`` (``tenant_admin`` or ``agent``): the link is shown once (and
    e-mailed with an SMTP server); 422 with the reason otherwise."""
    form = {"email": email, "name": name, "role": role}
    if role not in (Role.tenant_admin.value, Role.agent.value):
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, "role: tenant_admin or agent")
    try:
        issued = await create_invite(
            session,
            tenant_id=page.tenant.id,
            email=email,
            role=role,
            name=name,
            ttl_s=settings.console_invite_ttl_s,
            invited_by_id=page.user.id,
        )
        await session.commit()
    except UserExists:
        await session.rollback()
        error = _say(request, page, ALREADY_USER, email=email.strip().lower())
        return await _people_page(request, page, session, code=422, error=error, form=form)
    except ValueError:
        await session.rollback()
        return await _people_page(
            request, page, session, code=422, error=_say(request, page, NOT_AN_EMAIL), form=form
        )
    return await _show_new_link(request, page, session, settings, issued)


async def _show_new_link(
    request: Request, page: PageContext, session: Any, settings: Settings, issued: IssuedInvite
) -> Response:
    language = console_language(request, page.tenant)
    shown = await issue_invite_link(
        request,
        settings,
        issued,
        tenant=page.tenant,
        inviter=page.user.name or page.user.email,
        language=language,
    )
    log.warning(
        "console_invite_issued",
        tenant_id=str(page.tenant.id),
        invite_id=str(issued.invite.id),
        role=issued.invite.role,
        mailed=shown["mailed"],
        actor=f"console:{page.user.email}",
    )
    if shown["mailed"]:
        how = _say(request, page, MAILED)
    elif shown["mail_error"]:
        how = _say(request, page, MAIL_FAILED)  # the server's answer is in the log (mail_not_sent)
    else:
        how = _say(request, page, NOT_MAILED)
    message = _say(request, page, INVITED, email=issued.invite.email) + " " + how
    return await _people_page(request, page, session, message=message, new_link=shown)


@people_pages_router.post("/t/{slug}/people/invites/{invite_id}/{action}", response_class=HTMLResponse)
async def people_invite_action(
    request: Request,
    invite_id: uuid.UUID,
    action: str,
    page: AdminPage,
    session: SessionDep,
    settings: SettingsDep,
) -> Response:
    """``resend`` (a new link; the old one stops working) or ``revoke`` (the link stops working)."""
    if action not in ("resend", "revoke"):
        raise HTTPException(status.HTTP_404_NOT_FOUND, "use resend or revoke")
    try:
        if action == "resend":
            issued = await resend_invite(
                session,
                tenant_id=page.tenant.id,
                invite_id=invite_id,
                ttl_s=settings.console_invite_ttl_s,
                invited_by_id=page.user.id,
            )
            await session.commit()
            return await _show_new_link(request, page, session, settings, issued)
        invite = await revoke_invite(session, tenant_id=page.tenant.id, invite_id=invite_id)
        await session.commit()
    except InviteNotFound:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such invitation") from None
    except InviteRefused as exc:
        await session.rollback()
        return await _people_page(
            request, page, session, code=409, error=exc.text(console_language(request, page.tenant))
        )
    except UserExists as exc:
        await session.rollback()
        return await _people_page(request, page, session, code=409, error=str(exc))
    return await _people_page(
        request, page, session, message=_say(request, page, WITHDRAWN, email=invite.email)
    )


@people_pages_router.post("/t/{slug}/people/users/{user_id}/{action}", response_class=HTMLResponse)
async def people_user_action(
    request: Request, user_id: uuid.UUID, action: str, page: AdminPage, session: SessionDep
) -> Response:
    """``deactivate`` (their sessions end, they cannot sign in; not oneself) or ``reactivate``."""
    if action not in ("deactivate", "reactivate"):
        raise HTTPException(status.HTTP_404_NOT_FOUND, "use deactivate or reactivate")
    try:
        user = await set_user_active(
            session,
            tenant_id=page.tenant.id,
            user_id=user_id,
            active=action == "reactivate",
            actor_id=page.user.id,
        )
        await session.commit()
    except UserNotFound:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such user in this tenant") from None
    except CannotDeactivateSelf:
        await session.rollback()
        return await _people_page(request, page, session, code=409, error=_say(request, page, SELF))
    done = REACTIVATED if action == "reactivate" else DEACTIVATED
    return await _people_page(request, page, session, message=_say(request, page, done, email=user.email))


@people_pages_router.post("/t/{slug}/people/agents", response_class=HTMLResponse)
async def people_add_agent(
    request: Request,
    page: AdminPage,
    session: SessionDep,
    sessions: SessionsDep,
    name: Annotated[str, Form(max_length=200)],
    phone: Annotated[str, Form(max_length=40)],
    online: Annotated[str | None, Form()] = None,
) -> Response:
    """Add a human agent (their WhatsApp number, international); ``online=on`` also puts them online
    (every waiting conversation goes to them)."""
    form = {"agent_name": name, "agent_phone": phone}
    try:
        agent = await add_agent(session, tenant_id=page.tenant.id, name=name, phone=phone, online=False)
        await session.commit()
    except AgentExists:
        await session.rollback()
        return await _people_page(
            request, page, session, code=422, error=_say(request, page, PHONE_TAKEN), form=form
        )
    except ValueError as exc:
        await session.rollback()
        reason = NAME_MISSING if not name.strip() or "name" in str(exc) else BAD_PHONE
        log.info("console_agent_refused", tenant_id=str(page.tenant.id), reason=str(exc))
        return await _people_page(
            request, page, session, code=422, error=_say(request, page, reason), form=form
        )
    log.warning(
        "human_agent_added",
        tenant_id=str(page.tenant.id),
        agent_id=str(agent.id),
        actor=f"console:{page.user.email}",
    )
    message = _say(request, page, AGENT_ADDED, name=agent.name)
    if online == "on":
        return await _agent_status(request, page, session, sessions, agent.id, online=True)
    return await _people_page(request, page, session, message=message)


async def _agent_status(
    request: Request, page: PageContext, session: Any, sessions: Any, agent_id: uuid.UUID, *, online: bool
) -> Response:
    try:
        notices = await set_status(
            sessions,
            None,
            agent_id=agent_id,
            online=online,
            trace_id=f"console-{uuid.uuid4().hex[:12]}",
            actor=Actor.console_user(page.user.id),
        )
    except CommandError:
        agent = await session.get(HumanAgent, agent_id)
        count = agent.current_load if agent else 0
        error = _say(request, page, AGENT_STILL_BUSY, name=agent.name if agent else "", n=count)
        return await _people_page(request, page, session, code=409, error=error)
    async with sessions() as write, write.begin():
        await write_outgoing(write, tenant_id=page.tenant.id, items=notices)
    agent = await session.get(HumanAgent, agent_id, populate_existing=True)
    assert agent is not None
    message = (
        _say(request, page, AGENT_ONLINE, name=agent.name, n=len(notices))
        if online
        else _say(request, page, AGENT_OFFLINE, name=agent.name)
    )
    return await _people_page(request, page, session, message=message)


@people_pages_router.post("/t/{slug}/people/agents/{agent_id}/{action}", response_class=HTMLResponse)
async def people_agent_action(
    request: Request,
    agent_id: uuid.UUID,
    action: str,
    page: AdminPage,
    session: SessionDep,
    sessions: SessionsDep,
) -> Response:
    """``online`` / ``offline`` (refused while they still have open conversations) or ``remove``
    (refused while a conversation is theirs; their history stays)."""
    if action not in ("online", "offline", "remove"):
        raise HTTPException(status.HTTP_404_NOT_FOUND, "use online, offline or remove")
    agent = await session.get(HumanAgent, agent_id)
    if agent is None or agent.tenant_id != page.tenant.id:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such agent in this tenant")
    if action != "remove":
        return await _agent_status(request, page, session, sessions, agent_id, online=action == "online")
    try:
        removed = await remove_agent(session, tenant_id=page.tenant.id, query=agent.phone)
        await session.commit()
    except AgentNotFound:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such agent in this tenant") from None
    except AgentBusy as exc:
        await session.rollback()
        error = _say(request, page, AGENT_STILL_BUSY, name=exc.name, n=exc.open_conversations)
        return await _people_page(request, page, session, code=409, error=error)
    log.warning(
        "human_agent_removed",
        tenant_id=str(page.tenant.id),
        agent_id=str(agent_id),
        actor=f"console:{page.user.email}",
    )
    return await _people_page(
        request, page, session, message=_say(request, page, AGENT_REMOVED, name=removed.name)
    )


# --- teams ---------------------------------------------------------------------------------------------


async def _team_refused(
    request: Request, page: PageContext, session: Any, exc: Exception, name: str
) -> Response:
    await session.rollback()
    if isinstance(exc, TeamExists):
        error = _say(request, page, TEAM_NAME_TAKEN, name=exc.name)
    else:
        error = _say(request, page, TEAM_NAME_BAD)
    return await _people_page(request, page, session, code=422, error=error, form={"team_name": name})


@people_pages_router.post("/t/{slug}/people/teams", response_class=HTMLResponse)
async def people_create_team(
    request: Request, page: AdminPage, session: SessionDep, name: Annotated[str, Form(max_length=400)]
) -> Response:
    """Create a team (an empty one: add its agents next); 422 for an empty, too long or taken name."""
    try:
        team = await create_team(session, tenant_id=page.tenant.id, name=name)
        await session.commit()
    except (TeamExists, ValueError) as exc:
        return await _team_refused(request, page, session, exc, name)
    log.info(
        "team_created",
        tenant_id=str(page.tenant.id),
        team_id=str(team.id),
        actor=f"console:{page.user.email}",
    )
    return await _people_page(
        request, page, session, message=_say(request, page, TEAM_CREATED, name=team.name)
    )


@people_pages_router.post("/t/{slug}/people/teams/{team_id}/{action}", response_class=HTMLResponse)
async def people_team_action(
    request: Request,
    team_id: uuid.UUID,
    action: str,
    page: AdminPage,
    session: SessionDep,
    name: Annotated[str, Form(max_length=400)] = "",
    agent_id: Annotated[str, Form(max_length=40)] = "",
) -> Response:
    """``rename`` (``name``), ``delete`` (its conversations can go to any agent), ``add`` or ``remove`` an
    agent (``agent_id``)."""
    if action not in ("rename", "delete", "add", "remove"):
        raise HTTPException(status.HTTP_404_NOT_FOUND, "use rename, delete, add or remove")
    try:
        if action == "rename":
            team = await rename_team(session, tenant_id=page.tenant.id, team_id=team_id, name=name)
            message = _say(request, page, TEAM_RENAMED, name=team.name)
        elif action == "delete":
            team = await delete_team(session, tenant_id=page.tenant.id, team_id=team_id)
            message = _say(request, page, TEAM_DELETED, name=team.name)
        else:
            try:
                agent_uuid = uuid.UUID(agent_id)
            except ValueError:
                raise TeamNotFound("no agent") from None
            team, agent = await set_member(
                session,
                tenant_id=page.tenant.id,
                team_id=team_id,
                agent_id=agent_uuid,
                member=action == "add",
            )
            said = TEAM_MEMBER_ADDED if action == "add" else TEAM_MEMBER_REMOVED
            message = _say(request, page, said, agent=agent.name, name=team.name)
        await session.commit()
    except TeamNotFound:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such team or agent in this tenant") from None
    except (TeamExists, ValueError) as exc:
        return await _team_refused(request, page, session, exc, name)
    log.info(
        "team_changed",
        tenant_id=str(page.tenant.id),
        team_id=str(team_id),
        action=action,
        actor=f"console:{page.user.email}",
    )
    return await _people_page(request, page, session, message=message)


# --- the invitation link (no session) ---------------------------------------------------------------


_NO_REFERRER = {"Referrer-Policy": "same-origin"}
"""The link's token is in the address: no other site is sent that address (``same-origin``, not
``no-referrer``: with that, browsers post the form with ``Origin: null``, which the cross-site check refuses)."""


async def _invite_page(
    request: Request, session: Any, token: str, *, code: int = 200, error: str | None = None
) -> Response:
    try:
        invite = await invite_for_token(session, token)
    except InviteRefused as exc:
        log.info("console_invite_refused", problem=exc.problem.value)
        gone = status.HTTP_404_NOT_FOUND if exc.problem.value == "unknown" else status.HTTP_410_GONE
        return render(
            request,
            "invite.html",
            status_code=gone,
            invite=None,
            refused=exc.text(console_language(request)),
            headers=_NO_REFERRER,
        )
    tenant = await session.get(Tenant, invite.tenant_id)
    return render(
        request,
        "invite.html",
        status_code=code,
        invite=invite,
        invited_tenant=tenant,
        refused=None,
        error=error,
        min_chars=MIN_PASSWORD_CHARS,
        headers=_NO_REFERRER,
    )


@people_pages_router.get("/invite/{token}", response_class=HTMLResponse)
async def invite_open(request: Request, token: str, session: SessionDep) -> Response:
    """The set-password page of an invitation link (404 unknown, 410 expired, used or withdrawn)."""
    return await _invite_page(request, session, token[:200])


@people_pages_router.post("/invite/{token}", response_class=HTMLResponse)
async def invite_accept(
    request: Request,
    token: str,
    session: SessionDep,
    settings: SettingsDep,
    password: Annotated[str, Form(max_length=1024)],
    password_again: Annotated[str, Form(max_length=1024)],
    name: Annotated[str, Form(max_length=200)] = "",
) -> Response:
    """Choose the password: the account is created, the link stops working, and this browser is
    signed in (to the tenant's home page). A post from another site is refused like a login."""
    token = token[:200]
    language = console_language(request)
    reason = cross_site_reason(request)
    if reason is not None:
        log.warning("console_invite_cross_site", reason=reason)
        raise HTTPException(
            status.HTTP_403_FORBIDDEN, "This form came from another web site and was refused."
        )
    if password != password_again:
        return await _invite_page(
            request, session, token, code=400, error=gettext(language, PASSWORDS_DIFFER)
        )
    try:
        user = await accept_invite(session, token=token, password=password, name=name)
    except InviteRefused:
        await session.rollback()
        return await _invite_page(request, session, token)
    except WeakPassword as exc:
        await session.rollback()
        why = gettext(language, WEAK) % {"reason": weak_password_reason(exc, language)}
        return await _invite_page(request, session, token, code=400, error=why)
    except UserExists:
        await session.rollback()
        email = (await invite_for_token(session, token)).email
        return await _invite_page(
            request, session, token, code=409, error=gettext(language, ALREADY_USER) % {"email": email}
        )
    user.last_login_at = utcnow()
    cookie, _info = await start_session(session, user=user, ttl_s=settings.console_session_ttl_s)
    await session.commit()
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        cookie,
        max_age=settings.console_session_ttl_s,
        httponly=True,
        samesite="lax",
        secure=settings.console_cookie_secure,
        path="/",
    )
    return response
