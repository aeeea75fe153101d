"""Each attachment of a mail → one line the agent can read.

* larger than ``GMAIL_MAX_ATTACHMENT_BYTES``: named, not read (``[Attachment not read (too large): …]``);
* images: described by the vision model (:func:`switchboard.inbound.media.describe_image`);
* documents: text read by the knowledge parsers in their limited child process
  (:func:`switchboard.knowledge.isolation.parse_isolated`: PDF, DOCX, XLSX, CSV, TXT), the first
  :data:`MAX_DOCUMENT_CHARS` characters;
* anything unreadable (encrypted, corrupt, a format we do not read, the provider failing): named
  with the reason; the mail is never lost for it.

Attachment text is customer-supplied, untrusted content like the mail body.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import httpx

from switchboard.channels.gmail.mime import Attachment
from switchboard.inbound.media import MediaUnavailable, describe_image
from switchboard.knowledge.isolation import ParseLimits, ParserUnavailable, parse_isolated
from switchboard.knowledge.parsers import DocumentRejected
from switchboard.observability import get_logger
from switchboard.settings import Settings

__all__ = ["MAX_DOCUMENT_CHARS", "attachment_lines"]

log = get_logger(__name__)

MAX_DOCUMENT_CHARS = 4000
"""Characters of a document's text the agent reads (the rest is cut with an ellipsis)."""

Fetch = Callable[[str], Awaitable[tuple[bytes, str | None]]]
"""``partId`` → ``(bytes, MIME type)``; raises :class:`MediaUnavailable`."""


def _size(n: int) -> str:
    return f"{n / 1_000_000:.1f} MB" if n >= 1_000_000 else f"{max(n, 1) / 1000:.0f} KB"


async def _line(attachment: Attachment, fetch: Fetch, http: httpx.AsyncClient, settings: Settings) -> str:
    name = attachment.filename
    if attachment.size_bytes > settings.gmail_max_attachment_bytes:
        return f"[Attachment not read (too large, {_size(attachment.size_bytes)}): {name}]"
    try:
        data = attachment.data if attachment.data is not None else (await fetch(attachment.part_id))[0]
    except MediaUnavailable as exc:
        log.warning("gmail_attachment_unavailable", part_id=attachment.part_id, error=str(exc)[:200])
        return f"[Attachment could not be downloaded: {name}]"
    if attachment.mime.startswith("image/"):
        try:
            description = await describe_image(http, settings, data, attachment.mime)
        except MediaUnavailable as exc:
            log.warning("gmail_attachment_vision_failed", part_id=attachment.part_id, error=str(exc)[:200])
            return f"[Image attachment could not be described: {name}]"
        return f'[Image attachment {name}]: "{description}"'
    try:
        parsed = await asyncio.to_thread(parse_isolated, data, name, ParseLimits.from_settings(settings))
    except DocumentRejected as exc:
        return f"[Attachment could not be read ({exc.reason}): {name}]"
    except ParserUnavailable:
        return f"[Attachment could not be read now: {name}]"
    text = " ".join(" ".join(section.text.split()) for section in parsed.sections).strip()
    if len(text) > MAX_DOCUMENT_CHARS:
        text = text[:MAX_DOCUMENT_CHARS].rstrip() + " …"
    return f'[Attachment {name}]: "{text}"'


async def attachment_lines(
    attachments: Sequence[Attachment], *, fetch: Fetch, http: httpx.AsyncClient, settings: Settings
) -> list[str]:
    """One line per attachment, in the mail's order (module docstring)."""
    return [await _line(attachment, fetch, http, settings) for attachment in attachments]
