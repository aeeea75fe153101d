"""Structured parts as WhatsApp interactive messages (``type: "interactive"``), within Meta's limits.

Limits (Cloud API; counted here in UTF-16 units like every WhatsApp text, see ``channel.py``):

* reply buttons (``interactive.type = "button"``): at most 3 buttons, title at most 20 characters,
  id at most 256, body at most 1,024 (developers.facebook.com "Interactive reply buttons messages";
  the same numbers in Exotel's and whatsapp-api-js's references);
* lists (``type = "list"``): up to 10 sections with at most 10 rows in all, row title at most 24,
  row description at most 72, row id at most 200, the opening button's label at most 20, body at
  most 1,024 here (developers.facebook.com "Interactive list messages": "up to 10 sections, with up to
  10 rows for all sections combined"; row limits: WhatsApp Node.js SDK ``RowObject``; button label:
  whatsapp-api-js ``ActionList``; Gupshup documents 1,024 for the list message body);
* call-to-action URL (``type = "cta_url"``): body at most 1,024, ``display_text`` at most 20,
  an optional image header by link (developers.facebook.com "Interactive CTA URL button messages").

How a part is rendered (:func:`render_structured`): up to 3 options with titles that fit and no
descriptions or links are reply buttons; anything else is a list, 10 rows per message (more options:
more list messages, numbered ``(1/2)``). A product card is a ``cta_url`` message (link) or one reply
button (an id), with the image as header. Whatever a button or row cannot show in full (a long
title, a description, a link) is shortened there and written in full in a text message before it;
the reply's text goes in the first interactive body when it fits and nothing precedes it, else
in its own text message first. A tap comes back as ``interactive.button_reply`` / ``list_reply``
with the option's ``id`` and ``title`` (:mod:`switchboard.channels.whatsapp.normalize`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from switchboard.channels.base import OutboundPart
from switchboard.channels.render import details_text, fits, product_lines, shorten
from switchboard.replies.parts import OptionList, ProductCard, QuickReplies, ReplyOption, StructuredPart

__all__ = [
    "BODY_MAX",
    "BUTTONS_MAX",
    "BUTTON_TITLE_MAX",
    "CTA_TEXT_MAX",
    "LIST_BUTTON_MAX",
    "LIST_ROWS_MAX",
    "ROW_DESCRIPTION_MAX",
    "ROW_TITLE_MAX",
    "limit_problems",
    "render_structured",
]

BUTTONS_MAX = 3
"""Reply buttons in one message."""
BUTTON_TITLE_MAX = 20
"""Characters of a reply button's title."""
BODY_MAX = 1024
"""Characters of an interactive message's body text."""
LIST_ROWS_MAX = 10
"""Rows of one list message, all sections together."""
ROW_TITLE_MAX = 24
ROW_DESCRIPTION_MAX = 72
LIST_BUTTON_MAX = 20
"""Characters of the label of the button that opens a list."""
CTA_TEXT_MAX = 20
"""Characters of a ``cta_url`` button's ``display_text``."""


def _as_buttons(part: QuickReplies | OptionList) -> bool:
    return (
        isinstance(part, QuickReplies)
        and len(part.options) <= BUTTONS_MAX
        and all(fits(o.title, BUTTON_TITLE_MAX) and not o.description and not o.url for o in part.options)
    )


def _row(option: ReplyOption) -> tuple[dict[str, Any], bool]:
    """A list row and whether it lost something (then the option is written in full before it): a
    shortened title whose whole text does not fit the description, a shortened description, a link."""
    row: dict[str, Any] = {"id": option.id, "title": shorten(option.title, ROW_TITLE_MAX)}
    shortened = row["title"] != option.title
    lost = option.url is not None
    if option.description:
        row["description"] = shorten(option.description, ROW_DESCRIPTION_MAX)
        lost |= shortened or row["description"] != option.description
    elif shortened:
        row["description"] = shorten(option.title, ROW_DESCRIPTION_MAX)  # the whole title, on the row
        lost |= row["description"] != option.title
    return row, lost


def _choices(part: QuickReplies | OptionList) -> tuple[list[dict[str, Any]], list[tuple[int, ReplyOption]]]:
    """Interactive bodies (without ``body``) for a choices part, and the options to write in full."""
    if _as_buttons(part):
        buttons = [{"type": "reply", "reply": {"id": o.id, "title": o.title}} for o in part.options]
        return [{"type": "button", "action": {"buttons": buttons}}], []
    label = shorten(part.button_label if isinstance(part, OptionList) else "Options", LIST_BUTTON_MAX)
    bodies: list[dict[str, Any]] = []
    in_full: list[tuple[int, ReplyOption]] = []
    for start in range(0, len(part.options), LIST_ROWS_MAX):
        rows = []
        for number, option in enumerate(part.options[start : start + LIST_ROWS_MAX], start + 1):
            row, lost = _row(option)
            rows.append(row)
            if lost:
                in_full.append((number, option))
        bodies.append({"type": "list", "action": {"button": label, "sections": [{"rows": rows}]}})
    return bodies, in_full


def _product(card: ProductCard) -> tuple[dict[str, Any], str | None, str]:
    """The card's interactive body (without ``body``), the card in full when the body cannot hold it,
    and the body text."""
    full = "\n".join(product_lines(card))
    text = shorten(full, BODY_MAX)
    interactive: dict[str, Any]
    if card.cta.url:
        interactive = {
            "type": "cta_url",
            "action": {
                "name": "cta_url",
                "parameters": {"display_text": shorten(card.cta.title, CTA_TEXT_MAX), "url": card.cta.url},
            },
        }
    else:
        reply = {"id": card.cta.id, "title": shorten(card.cta.title, BUTTON_TITLE_MAX)}
        interactive = {"type": "button", "action": {"buttons": [{"type": "reply", "reply": reply}]}}
    if card.image_url:
        interactive["header"] = {"type": "image", "image": {"link": card.image_url}}
    return interactive, (full if text != full else None), text


def render_structured(text: str, parts: Sequence[StructuredPart]) -> list[OutboundPart]:
    """The reply ``text`` and ``parts`` as WhatsApp messages, in order (see the module docstring).

    Returns:
        Text parts (split later by the outbox writer) and ``interactive`` parts whose ``interactive``
        is the Cloud API's ``interactive`` object, each within the limits above.
    """
    out: list[OutboundPart] = []
    pending = text.strip()
    for part in parts:
        before: list[str] = []
        messages: list[dict[str, Any]] = []
        if isinstance(part, ProductCard):
            interactive, in_full, body = _product(part)
            if in_full:
                before.append(in_full)
            messages.append({**interactive, "body": {"text": body}})
        else:
            bodies, in_full_options = _choices(part)
            details = details_text(in_full_options)
            if details:
                before.append(details)
            for index, interactive in enumerate(bodies, 1):
                suffix = f" ({index}/{len(bodies)})" if len(bodies) > 1 else ""
                body = shorten(part.prompt, BODY_MAX - len(suffix)) + suffix
                if body != part.prompt + suffix and index == 1:
                    before.insert(0, part.prompt)
                messages.append({**interactive, "body": {"text": body}})
        first_body = messages[0]["body"]["text"]
        merged = f"{pending}\n\n{first_body}"
        if pending and not before and fits(merged, BODY_MAX):
            messages[0] = {**messages[0], "body": {"text": merged}}
        elif pending:
            out.append(OutboundPart(type="text", text=pending))
        pending = ""
        out += [OutboundPart(type="text", text=t) for t in before]
        out += [OutboundPart(type="interactive", interactive=m) for m in messages]
    if pending:
        out.append(OutboundPart(type="text", text=pending))
    return out


def limit_problems(interactive: dict[str, Any]) -> list[str]:
    """What in a Cloud API ``interactive`` object is over the limits above (empty: within them).

    The sender refuses such a part before calling Meta (it would fail with 131009 "parameter value is
    not valid"), and the Graph sandbox answers it with that error, so a renderer bug shows in tests.
    """
    problems: list[str] = []
    kind = interactive.get("type")
    body = ((interactive.get("body") or {}).get("text")) or ""
    if not body.strip():
        problems.append("body.text is empty")
    elif not fits(body, BODY_MAX):
        problems.append(f"body.text over {BODY_MAX}")
    action = interactive.get("action") or {}
    if kind == "button":
        buttons = action.get("buttons") or []
        if not 1 <= len(buttons) <= BUTTONS_MAX:
            problems.append(f"{len(buttons)} buttons (1..{BUTTONS_MAX})")
        for button in buttons:
            reply = button.get("reply") or {}
            if not reply.get("id") or len(str(reply["id"])) > 256:
                problems.append("button id empty or over 256")
            if not reply.get("title") or not fits(str(reply["title"]), BUTTON_TITLE_MAX):
                problems.append(f"button title empty or over {BUTTON_TITLE_MAX}")
    elif kind == "list":
        rows = [row for section in action.get("sections") or [] for row in section.get("rows") or []]
        if not 1 <= len(rows) <= LIST_ROWS_MAX:
            problems.append(f"{len(rows)} rows (1..{LIST_ROWS_MAX})")
        label = str(action.get("button") or "")
        if not label or not fits(label, LIST_BUTTON_MAX):
            problems.append(f"list button label empty or over {LIST_BUTTON_MAX}")
        for row in rows:
            if not row.get("id") or len(str(row["id"])) > 200:
                problems.append("row id empty or over 200")
            if not row.get("title") or not fits(str(row["title"]), ROW_TITLE_MAX):
                problems.append(f"row title empty or over {ROW_TITLE_MAX}")
            if row.get("description") is not None and not fits(str(row["description"]), ROW_DESCRIPTION_MAX):
                problems.append(f"row description over {ROW_DESCRIPTION_MAX}")
    elif kind == "cta_url":
        parameters = action.get("parameters") or {}
        if not parameters.get("url") or not str(parameters["url"]).startswith("https://"):
            problems.append("cta_url without an https url")
        display = str(parameters.get("display_text") or "")
        if not display or not fits(display, CTA_TEXT_MAX):
            problems.append(f"display_text empty or over {CTA_TEXT_MAX}")
    else:
        problems.append(f"interactive type {kind!r} is not one Switchboard sends")
    return problems
