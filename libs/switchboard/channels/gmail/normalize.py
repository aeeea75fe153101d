"""One Gmail message (``format=full``) → one :class:`~switchboard.contracts.InboundMessage`.

Nothing past this module reads Google's JSON. What a mail becomes, in this order:

1. **Ours** (a ``Message-ID`` we generated): :attr:`MailDecision.ours`; no row is stored for it, the
   ``gmail_sent_messages`` record is completed instead. Never wakes the agent.
2. **Sent from the mailbox by a person** (label ``SENT``, or From the mailbox's own address, without
   one of our ids): an echo (direction outbound): the conversation is handed to a person, as a reply
   typed in the WhatsApp Business app is.
3. **Automated** (:func:`~switchboard.channels.gmail.safety.automated_reason`): recorded, never answered.
4. Anything else: processed. Review signals (hidden text, text that reads like instructions) travel
   in ``review``.

The customer is the ``Reply-To`` address when it differs from ``From`` (a web form relays mail from a
no-reply address), else ``From``; their identity is ``email``. The conversation key is the Gmail
``threadId``; the de-duplication key is the Gmail message id; ``sent_at`` is ``internalDate`` (ms),
not the ``Date`` header.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from switchboard.channels.gmail.mime import ParsedMail
from switchboard.channels.gmail.safety import automated_reason, instruction_signals
from switchboard.contracts import InboundMessage, MediaRef, SenderIdentity
from switchboard.observability import get_logger

__all__ = ["MailDecision", "normalize_mail", "subject_line"]

log = get_logger(__name__)


@dataclass(frozen=True)
class MailDecision:
    """What to do with one mail."""

    message: InboundMessage | None
    """The row to store (``None`` for our own mail)."""
    ours: bool = False
    reason: str = "process"


def subject_line(subject: str) -> str:
    """The line the agent reads about the subject (mails carry one; chats do not)."""
    return f"[Subject: {subject}]" if subject else ""


def _facts(mail: ParsedMail) -> dict[str, Any]:
    return {
        "gmail_id": mail.gmail_id,
        "thread_id": mail.thread_id,
        "message_id": mail.message_id,
        "in_reply_to": mail.in_reply_to,
        "references": mail.references,
        "subject": mail.subject,
        "label_ids": mail.label_ids,
        "internal_date_ms": mail.internal_date_ms,
        "full_text": mail.full_text[:100_000],
        "to": mail.to_emails[:20],
    }


def normalize_mail(
    mail: ParsedMail, *, mailbox: str, our_message_ids: set[str], attachment_text: list[str] | None = None
) -> MailDecision:
    """Decide about ``mail`` received in ``mailbox`` (module docstring).

    Args:
        mailbox: the mailbox address, lower-cased.
        our_message_ids: ``Message-ID``\\ s we generated among this mail's ids (its own, at least).
        attachment_text: one readable line per attachment (documents read, images described).
    """
    if mail.message_id is not None and mail.message_id in our_message_ids:
        return MailDecision(message=None, ours=True, reason="our own reply")
    sent_at = (
        datetime.fromtimestamp(mail.internal_date_ms / 1000, tz=UTC)
        if mail.internal_date_ms
        else datetime.now(UTC)
    )
    by_mailbox = "SENT" in mail.label_ids or mail.from_email == mailbox
    media = [
        MediaRef(
            ref=f"{mail.gmail_id}/{a.part_id}", mime=a.mime, filename=a.filename, size_bytes=a.size_bytes
        )
        for a in mail.attachments
    ]
    body = mail.text
    lines = [line for line in (subject_line(mail.subject), body, *(attachment_text or [])) if line]
    raw = {"gmail": _facts(mail)}
    if by_mailbox:
        customer = next((address for address in mail.to_emails if address != mailbox), None)
        return MailDecision(
            message=InboundMessage(
                channel="gmail",
                account_id=mailbox,
                kind="text",
                external_id=mail.gmail_id,
                sender_id=customer or mailbox,
                sent_at=sent_at,
                text=body,
                media=media,
                raw=raw,
                action="record",
                echo=True,
                thread_key=mail.thread_id,
                identities=[SenderIdentity(kind="email", value=customer)] if customer else [],
                reply_to=mail.in_reply_to,
            ),
            reason="sent from the mailbox",
        )
    automated = automated_reason(mail)
    review = instruction_signals(mail)
    if mail.hidden_text:
        log.info(
            "mail_hidden_text_removed",
            gmail_id=mail.gmail_id,
            reasons=list(mail.hidden_reasons),
            hidden_chars=len(mail.hidden_text),
        )
    return MailDecision(
        message=InboundMessage(
            channel="gmail",
            account_id=mailbox,
            kind="text",
            external_id=mail.gmail_id,
            sender_id=mail.sender_email,
            sender_name=mail.sender_name,
            sent_at=sent_at,
            text="\n\n".join(lines),
            media=media,
            raw=raw,
            thread_key=mail.thread_id,
            action="record" if automated else "process",
            identities=[SenderIdentity(kind="email", value=mail.sender_email)],
            reply_to=mail.in_reply_to,
            review=review,
            flags={"automated": automated} if automated else {},
        ),
        reason=f"automated: {automated}" if automated else "process",
    )
