"""A Gmail ``messages.get`` (``format=full``) answer → :class:`ParsedMail`: headers, clean text, attachments.

Rules (Gmail API ``Message`` / ``MessagePart`` reference; payload INDEX notes 10):

* ``body.data`` is base64**url** of the part's bytes, already transfer-decoded even when the part's
  header still says ``quoted-printable`` (decoding again would turn ``ORD=20A7`` into ``ORD A7``);
  its charset is the part's ``Content-Type`` ``charset`` parameter (UTF-8 when absent or unknown).
* Header names are case-insensitive (``Message-Id`` / ``Message-ID``); values are decoded from
  RFC 2047 encoded-words defensively and idempotently (Gmail's ``full`` format usually hands them back
  decoded already: both give the same result).
* The body: in a ``multipart/alternative`` the ``text/plain`` part is preferred, HTML only when there is
  no plain text or when the HTML hides text (the plain part may carry what the HTML hides); HTML goes
  through :func:`switchboard.channels.gmail.html.html_to_text` (hidden content removed before any
  model sees it). Parts with a filename (or ``Content-Disposition: attachment``)
  are attachments, referenced by ``partId`` (attachment ids change between calls).
* What the customer just wrote: quoted history and signatures are cut by ``mail-parser-reply``
  (English, Spanish, German, French, Italian, Dutch, Portuguese-free list: the library's languages).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.header import decode_header, make_header
from email.message import Message as EmailMessage
from email.utils import getaddresses, parseaddr
from typing import Any

from mailparser_reply import EmailReplyParser

from switchboard.channels.gmail.html import html_to_text

__all__ = [
    "Attachment",
    "Headers",
    "ParsedMail",
    "REPLY_LANGUAGES",
    "b64url_decode",
    "cut_quoted",
    "decode_words",
    "parse_message",
]

REPLY_LANGUAGES = ("en", "es", "de", "fr", "it", "nl")
"""Languages whose reply headers ("On … wrote:", "El … escribió:") mail-parser-reply recognises."""
_REPLY_PARSER = EmailReplyParser(languages=list(REPLY_LANGUAGES))
_ENCODED_WORD = re.compile(r"=\?[^?]+\?[bBqQ]\?[^?]*\?=")


class Headers:
    """A part's headers, looked up case-insensitively (first value wins; :meth:`all` gives every value)."""

    def __init__(self, items: list[dict[str, Any]] | None) -> None:
        self._items = [(str(h.get("name", "")), str(h.get("value", ""))) for h in items or []]

    def get(self, name: str, default: str | None = None) -> str | None:
        wanted = name.lower()
        for key, value in self._items:
            if key.lower() == wanted:
                return value
        return default

    def all(self, name: str) -> list[str]:
        wanted = name.lower()
        return [value for key, value in self._items if key.lower() == wanted]

    def items(self) -> list[tuple[str, str]]:
        return list(self._items)


@dataclass(frozen=True)
class Attachment:
    """One attachment of a mail, by its stable ``partId``."""

    part_id: str
    mime: str
    filename: str
    size_bytes: int
    attachment_id: str | None
    """Gmail's ``body.attachmentId`` at the time of reading (may change; :attr:`part_id` is the key)."""
    data: bytes | None = None
    """Bytes when Gmail sent them inline (small parts), else ``None`` (fetched with attachments.get)."""


@dataclass
class ParsedMail:
    """What the channel reads of one Gmail message."""

    gmail_id: str
    thread_id: str
    label_ids: list[str]
    history_id: str | None
    internal_date_ms: int
    headers: Headers
    subject: str
    from_name: str | None
    from_email: str
    reply_to_name: str | None
    reply_to_email: str | None
    to_emails: list[str]
    message_id: str | None
    """The ``Message-ID`` header with its angle brackets (``None`` when missing)."""
    in_reply_to: str | None
    references: list[str]
    full_text: str
    """The whole body as text (quoted history included), what is stored."""
    text: str
    """What the customer just wrote: :attr:`full_text` without quoted history and signature."""
    hidden_text: str = ""
    """Text removed from the HTML as hidden (never shown to a model)."""
    hidden_reasons: tuple[str, ...] = ()
    """How that text was hidden (``display:none``, ``low contrast``…), for the log."""
    attachments: list[Attachment] = field(default_factory=list)
    content_type: str = ""

    @property
    def sender_email(self) -> str:
        """Who the customer is: ``Reply-To`` when it names someone else than a no-reply sender
        (a web form relays mail from ``no-reply@``), else ``From``."""
        return self.reply_to_email or self.from_email

    @property
    def sender_name(self) -> str | None:
        return self.reply_to_name if self.reply_to_email else self.from_name


def b64url_decode(data: str) -> bytes:
    """Base64url (``-``/``_``, padding optional) → bytes.

    Raises:
        ValueError: not base64.
    """
    try:
        return base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"not base64url: {exc}") from exc


def decode_words(value: str | None) -> str:
    """RFC 2047 encoded-words decoded (``=?utf-8?q?R=C3=BCck?=`` → ``Rück``); a value without any is
    returned unchanged, so decoding twice gives the same text."""
    if not value:
        return ""
    if not _ENCODED_WORD.search(value):
        return value
    try:
        return str(make_header(decode_header(value)))
    except (LookupError, UnicodeDecodeError, ValueError, binascii.Error):
        return value


def _address(value: str | None) -> tuple[str | None, str | None]:
    if not value:
        return None, None
    name, email = parseaddr(value)
    if not email or "@" not in email:
        return None, None
    return (decode_words(name).strip().strip('"') or None), email.strip().lower()


def _charset(part: dict[str, Any]) -> str:
    content_type = Headers(part.get("headers")).get("Content-Type") or ""
    message = EmailMessage()
    message["Content-Type"] = content_type or "text/plain"
    charset = message.get_content_charset() or "utf-8"
    return charset


def _part_text(part: dict[str, Any]) -> str:
    data = (part.get("body") or {}).get("data")
    if not data:
        return ""
    raw = b64url_decode(data)
    charset = _charset(part)
    try:
        return raw.decode(charset, errors="replace")
    except LookupError:
        return raw.decode("utf-8", errors="replace")


def _walk(part: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield part
    for child in part.get("parts") or []:
        yield from _walk(child)


def _is_attachment(part: dict[str, Any]) -> bool:
    if part.get("filename"):
        return True
    disposition = (Headers(part.get("headers")).get("Content-Disposition") or "").lower()
    return disposition.startswith("attachment")


def _filename(part: dict[str, Any]) -> str:
    if part.get("filename"):
        return decode_words(str(part["filename"]))
    message = EmailMessage()
    for key, value in Headers(part.get("headers")).items():
        if key.lower() in ("content-disposition", "content-type"):
            message[key] = value
    return decode_words(message.get_filename() or "") or "attachment"


def _body_parts(payload: dict[str, Any]) -> tuple[str, str]:
    """``(plain, html)``: the first non-empty ``text/plain`` and ``text/html`` that are not attachments."""
    plain = html = ""
    for part in _walk(payload):
        if _is_attachment(part):
            continue
        mime = str(part.get("mimeType") or "").lower()
        if mime == "text/plain" and not plain:
            plain = _part_text(part)
        elif mime == "text/html" and not html:
            html = _part_text(part)
    return plain, html


def cut_quoted(text: str) -> str:
    """What the sender just wrote: ``text`` without quoted history and signature (the whole text when
    the parser finds nothing else)."""
    if not text.strip():
        return ""
    try:
        latest = _REPLY_PARSER.parse_reply(text)
    except Exception:  # noqa: BLE001 (a parser bug must not lose the mail: keep the whole text)
        latest = None
    latest = (latest or "").strip()
    return latest or text.strip()


def _ids(value: str | None) -> list[str]:
    return re.findall(r"<[^<>\s]+>", value or "")


def parse_message(message: dict[str, Any]) -> ParsedMail:
    """Read one ``messages.get`` (``format=full``) answer.

    Raises:
        ValueError: no ``id`` or ``threadId``, or no usable sender address.
    """
    gmail_id, thread_id = str(message.get("id") or ""), str(message.get("threadId") or "")
    if not gmail_id or not thread_id:
        raise ValueError("message without id or threadId")
    payload = message.get("payload") or {}
    headers = Headers(payload.get("headers"))
    from_name, from_email = _address(headers.get("From"))
    reply_name, reply_email = _address(headers.get("Reply-To"))
    if from_email is None and reply_email is None:
        raise ValueError("message without a sender address")
    if reply_email is not None and reply_email == from_email:
        reply_name, reply_email = None, None  # the same person: keep From's name
    plain, html = _body_parts(payload)
    cleaned = html_to_text(html) if html else None
    hidden, reasons = (cleaned.hidden_text, cleaned.hidden_reasons) if cleaned else ("", ())
    if plain.strip() and not hidden:
        full = plain.replace("\r\n", "\n").strip()
    elif cleaned is not None:
        # the HTML hid text: a plain part made from that HTML carries it too, so the model reads
        # what the reader of the HTML sees
        full = cleaned.text
    else:
        full = ""
    attachments = [
        Attachment(
            part_id=str(part.get("partId") or ""),
            mime=str(part.get("mimeType") or "application/octet-stream").lower(),
            filename=_filename(part),
            size_bytes=int((part.get("body") or {}).get("size") or 0),
            attachment_id=(part.get("body") or {}).get("attachmentId"),
            data=b64url_decode(part["body"]["data"]) if (part.get("body") or {}).get("data") else None,
        )
        for part in _walk(payload)
        if _is_attachment(part)
    ]
    to_emails = [
        email.lower() for _, email in getaddresses([*headers.all("To"), *headers.all("Cc")]) if "@" in email
    ]
    message_id = (_ids(headers.get("Message-ID")) or [None])[0]
    try:
        internal_ms = int(message.get("internalDate") or 0)
    except (TypeError, ValueError):
        internal_ms = 0
    return ParsedMail(
        gmail_id=gmail_id,
        thread_id=thread_id,
        label_ids=[str(label) for label in message.get("labelIds") or []],
        history_id=str(message["historyId"]) if message.get("historyId") is not None else None,
        internal_date_ms=internal_ms,
        headers=headers,
        subject=" ".join(decode_words(headers.get("Subject")).split()),
        from_name=from_name,
        from_email=from_email or reply_email or "",
        reply_to_name=reply_name,
        reply_to_email=reply_email,
        to_emails=to_emails,
        message_id=message_id,
        in_reply_to=(_ids(headers.get("In-Reply-To")) or [None])[0],
        references=_ids(headers.get("References")),
        full_text=full,
        text=cut_quoted(full),
        hidden_text=hidden,
        hidden_reasons=reasons,
        attachments=attachments,
        content_type=(headers.get("Content-Type") or "").lower(),
    )
