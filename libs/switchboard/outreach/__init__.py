"""Messages the business starts: a conversation opened with a customer by phone (an approved WhatsApp
template, or free text within the customer-service window), and a person's sends into a conversation
beyond plain text (buttons, lists). Everything goes through the one outbox writer, so delivery,
statuses and retries are those of every other message (:mod:`switchboard.outbox`)."""

from switchboard.outreach.sends import (
    OutreachRefused,
    Sent,
    TemplateChoice,
    normalize_phone,
    send_message,
    start_conversation,
    window_state,
)

__all__ = [
    "OutreachRefused",
    "Sent",
    "TemplateChoice",
    "normalize_phone",
    "send_message",
    "start_conversation",
    "window_state",
]
