"""A reply in the customer's thread, as RFC 5322 bytes for ``users.messages.send``.

Gmail threads a sent message into an existing thread when the request carries the ``threadId``
**and** the message has ``In-Reply-To`` / ``References`` naming the customer's ``Message-ID`` **and**
the same subject (Gmail API docs, "Managing threads"). So a reply:

* ``In-Reply-To``: the customer's ``Message-ID``; ``References``: their ``References`` followed by
  that id (no id twice);
* ``Subject``: ``Re: <their subject>``, never a second ``Re:`` (their subject already starting with
  ``Re:`` is kept as it is), never a subject the model wrote;
* ``From``: the mailbox; a ``text/plain`` part and a ``text/html`` alternative (the same text,
  escaped, paragraphs kept);
* ``Message-ID``: ours, ``<sb.<correlation>@<mailbox domain>>``: the same for every attempt of one
  outbox part, recorded before the send so the copy that shows up in the mailbox's history is
  recognised as ours even if the send's answer is lost.
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import format_datetime, formataddr

from switchboard.db.models import utcnow

__all__ = ["ReplyContext", "build_reply", "our_message_id", "reply_subject", "encode_raw"]

_RE = re.compile(r"^\s*re\s*:", re.IGNORECASE)


@dataclass(frozen=True)
class ReplyContext:
    """What a reply needs to know about the mail it answers (stored under ``raw.gmail`` of the inbound row)."""

    thread_id: str | None
    subject: str
    message_id: str | None
    references: tuple[str, ...] = ()


def reply_subject(subject: str) -> str:
    """``Re: <subject>``, or ``subject`` itself when it already starts with ``Re:``."""
    subject = " ".join(subject.split())
    if _RE.match(subject):
        return subject
    return f"Re: {subject}" if subject else "Re:"


def our_message_id(correlation_id: str, mailbox: str) -> str:
    """``<sb.<correlation>@<mailbox domain>>`` (stable per outbox part)."""
    token = re.sub(r"[^A-Za-z0-9]", "", correlation_id)[:64] or "x"
    domain = mailbox.split("@", 1)[1] if "@" in mailbox else "switchboard.invalid"
    return f"<sb.{token}@{domain}>"


def _html(text: str) -> str:
    paragraphs = [p for p in re.split(r"\n\s*\n", text.strip()) if p.strip()]
    body = "".join(f"<p>{html.escape(p).replace(chr(10), '<br>')}</p>" for p in paragraphs)
    return f'<!DOCTYPE html><html><body><div dir="auto">{body}</div></body></html>'


def build_reply(
    *,
    mailbox: str,
    mailbox_name: str | None,
    to: str,
    text: str,
    context: ReplyContext,
    message_id: str,
    automatic: bool = True,
) -> EmailMessage:
    """The reply as an :class:`~email.message.EmailMessage` (module docstring for every header).

    Args:
        automatic: the agent wrote it (``Auto-Submitted: auto-replied``, RFC 3834, so other robots
            do not answer it); ``False`` for a person's reply.
    """
    message = EmailMessage()
    message["From"] = formataddr((mailbox_name, mailbox)) if mailbox_name else mailbox
    message["To"] = to
    message["Subject"] = reply_subject(context.subject)
    message["Date"] = format_datetime(utcnow())
    message["Message-ID"] = message_id
    if context.message_id:
        message["In-Reply-To"] = context.message_id
        references = [r for r in context.references if r != context.message_id]
        message["References"] = " ".join([*references, context.message_id])
    if automatic:
        message["Auto-Submitted"] = "auto-replied"
    message.set_content(text)
    message.add_alternative(_html(text), subtype="html")
    return message


def encode_raw(message: EmailMessage) -> str:
    """The ``raw`` field: base64url of the message's bytes."""
    return base64.urlsafe_b64encode(message.as_bytes()).decode()
