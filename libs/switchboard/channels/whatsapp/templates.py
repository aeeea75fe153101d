"""WhatsApp message templates: listed from the Graph API, stored per number, filled in and checked.

A business may write to a customer outside the 24-hour customer-service window only with a template
Meta approved. Templates belong to the WhatsApp Business Account (WABA) of the number;
:func:`refresh_templates` lists them (``GET /{version}/{waba_id}/message_templates``, every page) and
replaces the number's stored rows (``whatsapp_templates``). :func:`fill_template` checks the values a
sender gives against the stored template and returns the ``template`` object of a Cloud API send
(``{"name", "language": {"code"}, "components": [...]}``), so a mistake is refused here in plain words
instead of by Meta later (error 132000 "number of parameters does not match").

Template shape (Cloud API "Message templates" reference): ``components`` is a list of ``HEADER``
(``format`` ``TEXT`` with at most one placeholder, or ``IMAGE`` / ``VIDEO`` / ``DOCUMENT`` /
``LOCATION``), ``BODY`` (``text`` with placeholders), ``FOOTER`` and ``BUTTONS`` (``URL`` buttons whose
``url`` may end in one placeholder, ``QUICK_REPLY``, ``PHONE_NUMBER``...). Placeholders are ``{{1}}``,
``{{2}}``... (``parameter_format`` ``POSITIONAL``) or ``{{order_id}}`` (``NAMED``).

Parameter rules Meta enforces (error 132018 otherwise): a text value is not empty and holds no
new line, no tab and no more than four spaces in a row; a header text is at most 60 characters once
filled, a body at most 1,024.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from sqlmodel import col, delete, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import ChannelAccount, WhatsAppTemplate, utcnow
from switchboard.errors import SwitchboardError
from switchboard.observability import get_logger
from switchboard.validation import has_unstorable_chars

__all__ = [
    "HEADER_TEXT_MAX",
    "BODY_TEXT_MAX",
    "MEDIA_HEADER_FORMATS",
    "TemplateRefused",
    "TemplateValues",
    "body_placeholders",
    "fill_template",
    "find_template",
    "list_templates",
    "account_graph",
    "refresh_account_templates",
    "upload_media",
    "refresh_templates",
    "refusal_of",
    "store_templates",
    "template_summary",
]

log = get_logger(__name__)

HEADER_TEXT_MAX = 60
"""Characters of a text header once its placeholder is filled (Cloud API)."""
BODY_TEXT_MAX = 1024
"""Characters of a template body once filled (Cloud API)."""
PARAMETER_MAX = 1024
"""Characters of one parameter value (a body cannot hold more anyway)."""
MEDIA_HEADER_FORMATS = frozenset({"IMAGE", "VIDEO", "DOCUMENT"})
TEMPLATE_PAGES_MAX = 50
"""Pages of ``message_templates`` read at most in one refresh (100 templates a page)."""

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z0-9_]+)\s*\}\}")


class TemplateRefused(SwitchboardError):
    """A template cannot be sent as asked: unknown, not approved, or values that do not fit it.

    Attributes:
        code: a stable code: ``template_not_found``, ``template_not_approved``,
            ``template_parameters_invalid``.
    """

    def __init__(self, message: str, *, code: str) -> None:
        self.code = code
        super().__init__(message)


@dataclass(frozen=True)
class TemplateValues:
    """What a sender fills a template with.

    Attributes:
        body: the body's values: a list in placeholder order (``{{1}}``, ``{{2}}``...) or, for a template
            with named placeholders, a mapping of name to value.
        header: the value of a text header's one placeholder.
        header_media: a media header: ``{"link": "https://..."}`` (Meta fetches it) or ``{"id": media_id}``;
            ``filename`` too for a document.
        buttons: one value per URL button whose address ends in a placeholder, in button order.
    """

    body: list[str] | dict[str, str] = field(default_factory=list)
    header: str | None = None
    header_media: dict[str, str] | None = None
    buttons: list[str] = field(default_factory=list)


def _placeholders(text: str) -> list[str]:
    seen: list[str] = []
    for name in _PLACEHOLDER.findall(text or ""):
        if name not in seen:
            seen.append(name)
    return seen


def _component(components: list[dict[str, Any]], kind: str) -> dict[str, Any] | None:
    return next((c for c in components if str(c.get("type", "")).upper() == kind), None)


def body_placeholders(template: WhatsAppTemplate) -> list[str]:
    """The body's placeholder names in order of first use (``["1", "2"]`` or ``["name", "order_id"]``)."""
    body = _component(template.components, "BODY") or {}
    return _placeholders(str(body.get("text") or ""))


def _url_buttons(components: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """``(index, button)`` of the URL buttons whose address takes a value."""
    buttons = (_component(components, "BUTTONS") or {}).get("buttons") or []
    return [
        (index, button)
        for index, button in enumerate(buttons)
        if str(button.get("type", "")).upper() == "URL" and _placeholders(str(button.get("url") or ""))
    ]


def template_summary(template: WhatsAppTemplate) -> dict[str, Any]:
    """What a sender needs to know to fill the template: its text and the values it takes."""
    header = _component(template.components, "HEADER") or {}
    body = _component(template.components, "BODY") or {}
    header_format = str(header.get("format") or "").upper() or None
    return {
        "name": template.name,
        "language": template.language,
        "status": template.status,
        "category": template.category,
        "parameter_format": template.parameter_format,
        "header_format": header_format,
        "header_text": header.get("text") if header_format == "TEXT" else None,
        "header_values": len(_placeholders(str(header.get("text") or ""))) if header_format == "TEXT" else 0,
        "body_text": str(body.get("text") or ""),
        "body_values": body_placeholders(template),
        "button_values": len(_url_buttons(template.components)),
        "refreshed_at": template.created_at,
    }


def _check_value(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise TemplateRefused(f"{where} must be text", code="template_parameters_invalid")
    if not value.strip():
        raise TemplateRefused(f"{where} is empty", code="template_parameters_invalid")
    if "\n" in value or "\t" in value or "     " in value:
        raise TemplateRefused(
            f"{where} may not hold a new line, a tab or more than four spaces in a row (WhatsApp's rule)",
            code="template_parameters_invalid",
        )
    if len(value) > PARAMETER_MAX or has_unstorable_chars(value):
        raise TemplateRefused(
            f"{where} is longer than {PARAMETER_MAX} characters or holds an invalid character",
            code="template_parameters_invalid",
        )
    return value


def _fill(text: str, values: dict[str, str]) -> str:
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), text)


def _body_values(template: WhatsAppTemplate, given: list[str] | dict[str, str]) -> list[tuple[str, str]]:
    names = body_placeholders(template)
    named = template.parameter_format.upper() == "NAMED"
    if isinstance(given, dict):
        if not named:
            raise TemplateRefused(
                f"template {template.name} numbers its values ({{{{1}}}}, {{{{2}}}}...): give body as a list "
                f"of {len(names)}",
                code="template_parameters_invalid",
            )
        missing, extra = sorted(set(names) - set(given)), sorted(set(given) - set(names))
        if missing or extra:
            raise TemplateRefused(
                f"template {template.name} takes the body values {names}"
                + (f"; missing {missing}" if missing else "")
                + (f"; not in the template {extra}" if extra else ""),
                code="template_parameters_invalid",
            )
        return [(name, _check_value(given[name], f"body value {name!r}")) for name in names]
    if named and names:
        raise TemplateRefused(
            f"template {template.name} names its values: give body as an object with {names}",
            code="template_parameters_invalid",
        )
    if len(given) != len(names):
        raise TemplateRefused(
            f"template {template.name} takes {len(names)} body value(s), {len(given)} given",
            code="template_parameters_invalid",
        )
    return [
        (name, _check_value(value, f"body value {index}"))
        for index, (name, value) in enumerate(zip(names, given, strict=True), 1)
    ]


def _header_parameters(template: WhatsAppTemplate, values: TemplateValues) -> list[dict[str, Any]] | None:
    header = _component(template.components, "HEADER")
    header_format = str((header or {}).get("format") or "").upper()
    if header is None or header_format not in ({"TEXT"} | MEDIA_HEADER_FORMATS):
        if values.header is not None or values.header_media is not None:
            raise TemplateRefused(
                f"template {template.name} has no header to fill", code="template_parameters_invalid"
            )
        return None
    if header_format == "TEXT":
        names = _placeholders(str(header.get("text") or ""))
        if values.header_media is not None:
            raise TemplateRefused(
                f"template {template.name} has a text header, not a media one",
                code="template_parameters_invalid",
            )
        if not names:
            if values.header is not None:
                raise TemplateRefused(
                    f"template {template.name}'s header takes no value", code="template_parameters_invalid"
                )
            return None
        if values.header is None:
            raise TemplateRefused(
                f"template {template.name}'s header takes one value", code="template_parameters_invalid"
            )
        value = _check_value(values.header, "header value")
        if len(_fill(str(header.get("text") or ""), {names[0]: value})) > HEADER_TEXT_MAX:
            raise TemplateRefused(
                f"the header is longer than {HEADER_TEXT_MAX} characters once filled",
                code="template_parameters_invalid",
            )
        parameter: dict[str, Any] = {"type": "text", "text": value}
        if template.parameter_format.upper() == "NAMED":
            parameter["parameter_name"] = names[0]
        return [parameter]
    kind = header_format.lower()
    media = values.header_media
    if values.header is not None:
        raise TemplateRefused(
            f"template {template.name} has a {kind} header: give header_media, not a text",
            code="template_parameters_invalid",
        )
    if not media or not (media.get("link") or media.get("id")):
        raise TemplateRefused(
            f"template {template.name} has a {kind} header: give header_media with a link or a media id",
            code="template_parameters_invalid",
        )
    link = media.get("link")
    if link is not None and (
        not str(link).startswith("https://") or len(str(link)) > 2000 or has_unstorable_chars(str(link))
    ):
        raise TemplateRefused(
            "the header's link must be an https:// address of at most 2,000 characters",
            code="template_parameters_invalid",
        )
    body: dict[str, Any] = {"link": str(link)} if link else {"id": str(media["id"])}
    if kind == "document" and media.get("filename"):
        body["filename"] = _check_value(str(media["filename"]), "document file name")[:240]
    return [{"type": kind, kind: body}]


def fill_template(template: WhatsAppTemplate, values: TemplateValues) -> dict[str, Any]:
    """The Cloud API ``template`` object of a send, ``{"name", "language", "components"}`` (``language``
    as a plain code: the sender wraps it), after checking ``values`` against the template.

    Raises:
        TemplateRefused: the template is not approved (``template_not_approved``), or a value is
            missing, extra, empty, of the wrong kind or too long (``template_parameters_invalid``); the
            message says which in plain words.
    """
    if template.status.upper() != "APPROVED":
        raise TemplateRefused(
            f"template {template.name} ({template.language}) is {template.status.lower()}, not approved by "
            "WhatsApp: only approved templates can be sent",
            code="template_not_approved",
        )
    components: list[dict[str, Any]] = []
    header = _header_parameters(template, values)
    if header:
        components.append({"type": "header", "parameters": header})
    body_values = _body_values(template, values.body)
    filled = _fill(str((_component(template.components, "BODY") or {}).get("text") or ""), dict(body_values))
    if len(filled) > BODY_TEXT_MAX:
        raise TemplateRefused(
            f"the message is {len(filled)} characters once filled, over WhatsApp's {BODY_TEXT_MAX}",
            code="template_parameters_invalid",
        )
    if body_values:
        named = template.parameter_format.upper() == "NAMED"
        components.append(
            {
                "type": "body",
                "parameters": [
                    {"type": "text", "text": value, **({"parameter_name": name} if named else {})}
                    for name, value in body_values
                ],
            }
        )
    buttons = _url_buttons(template.components)
    if len(values.buttons) != len(buttons):
        raise TemplateRefused(
            f"template {template.name} takes {len(buttons)} button value(s) (the end of each link), "
            f"{len(values.buttons)} given",
            code="template_parameters_invalid",
        )
    for (index, _button), value in zip(buttons, values.buttons, strict=True):
        components.append(
            {
                "type": "button",
                "sub_type": "url",
                "index": str(index),
                "parameters": [{"type": "text", "text": _check_value(value, f"button value {index + 1}")}],
            }
        )
    out: dict[str, Any] = {"name": template.name, "language": template.language}
    if components:
        out["components"] = components
    return out


def filled_text(template: WhatsAppTemplate, values: TemplateValues) -> str:
    """The body as the customer reads it (for the conversation's history)."""
    body = str((_component(template.components, "BODY") or {}).get("text") or "")
    if isinstance(values.body, dict):
        return _fill(body, values.body)
    return _fill(body, dict(zip(body_placeholders(template), values.body, strict=False)))


async def list_templates(
    session: AsyncSession, *, tenant_id: uuid.UUID, channel_account_id: uuid.UUID | None = None
) -> list[WhatsAppTemplate]:
    """The tenant's stored templates (of one number when given), by name then language."""
    query = select(WhatsAppTemplate).where(WhatsAppTemplate.tenant_id == tenant_id)
    if channel_account_id is not None:
        query = query.where(WhatsAppTemplate.channel_account_id == channel_account_id)
    rows = await session.exec(query.order_by(col(WhatsAppTemplate.name), col(WhatsAppTemplate.language)))
    return list(rows.all())


async def find_template(
    session: AsyncSession, *, account: ChannelAccount, name: str, language: str | None
) -> WhatsAppTemplate:
    """The stored template ``name`` of ``account`` in ``language`` (any language when it has one only).

    Raises:
        TemplateRefused: ``template_not_found``, with the languages it has when the language is wrong.
    """
    rows = list(
        (
            await session.exec(
                select(WhatsAppTemplate).where(
                    WhatsAppTemplate.channel_account_id == account.id, WhatsAppTemplate.name == name
                )
            )
        ).all()
    )
    if language:
        found = next((row for row in rows if row.language == language), None)
        if found is not None:
            return found
        if rows:
            raise TemplateRefused(
                f"template {name} exists in {sorted(r.language for r in rows)}, not in {language}",
                code="template_not_found",
            )
    elif len(rows) == 1:
        return rows[0]
    elif rows:
        raise TemplateRefused(
            f"template {name} exists in several languages {sorted(r.language for r in rows)}: name one",
            code="template_not_found",
        )
    raise TemplateRefused(
        f"no template {name} on this number: refresh the templates after WhatsApp approved it",
        code="template_not_found",
    )


def _row_of(account: ChannelAccount, waba_id: str, item: dict[str, Any]) -> WhatsAppTemplate | None:
    name, language = str(item.get("name") or "")[:512], str(item.get("language") or "")[:16]
    if not name or not language:
        return None
    components = item.get("components") if isinstance(item.get("components"), list) else []
    return WhatsAppTemplate(
        tenant_id=account.tenant_id,
        channel_account_id=account.id,
        waba_id=waba_id,
        name=name,
        language=language,
        status=str(item.get("status") or "UNKNOWN")[:32],
        category=str(item.get("category") or "")[:32],
        parameter_format=str(item.get("parameter_format") or "POSITIONAL")[:16],
        components=[c for c in components if isinstance(c, dict)],
        external_id=str(item.get("id") or ""),
        created_at=utcnow(),
    )


async def store_templates(
    session: AsyncSession, *, account: ChannelAccount, waba_id: str, items: list[dict[str, Any]]
) -> list[WhatsAppTemplate]:
    """Replace ``account``'s stored templates with ``items`` (Meta's ``data`` entries); the caller commits.
    A name and language listed twice keeps the first."""
    await session.exec(delete(WhatsAppTemplate).where(col(WhatsAppTemplate.channel_account_id) == account.id))  # type: ignore[call-overload]
    rows: dict[tuple[str, str], WhatsAppTemplate] = {}
    for item in items:
        row = _row_of(account, waba_id, item) if isinstance(item, dict) else None
        if row is not None:
            rows.setdefault((row.name, row.language), row)
    session.add_all(rows.values())
    await session.flush()
    return sorted(rows.values(), key=lambda r: (r.name, r.language))


async def stored_waba_id(session: AsyncSession, account: ChannelAccount) -> str | None:
    """The business account id the number's templates were last listed from, if ever."""
    return (
        await session.exec(
            select(WhatsAppTemplate.waba_id).where(WhatsAppTemplate.channel_account_id == account.id).limit(1)
        )
    ).first()


async def refresh_templates(
    session: AsyncSession, *, account: ChannelAccount, waba_id: str | None, graph: Any, token: str
) -> list[WhatsAppTemplate]:
    """List the templates of ``waba_id`` from the Graph API and store them as ``account``'s; the caller
    commits.

    Args:
        waba_id: the WhatsApp Business Account (digits); ``None``: the one of the last refresh.
        graph: the account's :class:`~switchboard.channels.whatsapp.send.GraphClient`.

    Raises:
        TemplateRefused: ``waba_id`` missing or not digits (``waba_id_required``).
        GraphSendError: Meta refused (a token without ``whatsapp_business_management``) or was unreachable.
    """
    waba_id = (waba_id or "").strip() or await stored_waba_id(session, account)
    if not waba_id or not waba_id.isdigit() or len(waba_id) > 64:
        raise TemplateRefused(
            "name the WhatsApp Business Account id (digits) the number belongs to", code="waba_id_required"
        )
    items = await graph.list_templates(waba_id=waba_id, token=token, max_pages=TEMPLATE_PAGES_MAX)
    rows = await store_templates(session, account=account, waba_id=waba_id, items=items)
    log.info(
        "whatsapp_templates_refreshed",
        tenant_id=str(account.tenant_id),
        account_id=str(account.id),
        templates=len(rows),
    )
    return rows


def account_graph(settings: Any, account: ChannelAccount, *, transport: Any = None) -> tuple[Any, str]:
    """A new :class:`~switchboard.channels.whatsapp.send.GraphClient` of ``account``'s API root and its
    token (the sandbox takes any); the caller closes the client (``aclose``)."""
    from switchboard.channels.accounts import access_token_of
    from switchboard.channels.whatsapp.send import GraphClient
    from switchboard.crypto import CredentialCipher

    token = access_token_of(account, CredentialCipher.from_settings(settings)) or "sandbox-token"
    graph = GraphClient(
        settings.channel_api_base_url("whatsapp", account.api_base_url),
        settings.whatsapp_api_version,
        timeout_s=settings.whatsapp_send_timeout_s,
        transport=transport,
    )
    return graph, token


async def upload_media(settings: Any, account: ChannelAccount, data: bytes, mime: str, filename: str) -> str:
    """Hand a file to WhatsApp as a media object of ``account``'s number; returns its id.

    Raises:
        GraphSendError: Meta refused the file or could not be reached.
    """
    graph, token = account_graph(settings, account)
    try:
        return str(
            await graph.upload_media(
                phone_number_id=account.external_account_id,
                token=token,
                data=data,
                mime=mime,
                filename=filename,
            )
        )
    finally:
        await graph.aclose()


async def refresh_account_templates(
    session: AsyncSession,
    settings: Any,
    *,
    account: ChannelAccount,
    waba_id: str | None,
    transport: Any = None,
) -> list[WhatsAppTemplate]:
    """:func:`refresh_templates` with the account's own Graph API root and token (what the console,
    the API and the CLI call); the caller commits.

    Raises:
        TemplateRefused: as :func:`refresh_templates`.
        GraphSendError: as :func:`refresh_templates`.
    """
    graph, token = account_graph(settings, account, transport=transport)
    try:
        return await refresh_templates(session, account=account, waba_id=waba_id, graph=graph, token=token)
    finally:
        await graph.aclose()


def refusal_of(exc: Exception) -> str:
    """A Graph API failure of a refresh in words a tenant reads (never Meta's internals)."""
    code = getattr(exc, "code", None)
    if code == 190:
        return (
            "WhatsApp refused the number's access token: it expired or was revoked; connect the number again"
        )
    if code in (10, 200):
        return "the access token may not read message templates (it needs whatsapp_business_management)"
    if code == 100:
        return "WhatsApp does not know this business account id, or the number's token cannot see it"
    if getattr(exc, "is_transient", False):
        return "WhatsApp could not be reached; try again in a minute"
    return "WhatsApp refused to list the templates"
