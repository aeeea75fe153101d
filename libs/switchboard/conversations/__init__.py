"""The conversations core (docs/concepts.md#customers-and-conversations): channel-neutral customers, lifecycle, history.

* :mod:`~switchboard.conversations.identities`: which customer a message is from, under any of their
  channel identities (phone, BSUID, IGSID, e-mail), and where a reply goes.
* :mod:`~switchboard.conversations.lifecycle`: the only writer of a conversation's status (opened, to a
  human, back to the AI, closed), each change a ``conversation_events`` row.
* :mod:`~switchboard.conversations.history`: the one reader and writer of a conversation's messages.
* :mod:`~switchboard.conversations.notes`: private notes, kept apart from the messages.
"""

from switchboard.conversations.history import (
    HISTORY_MAX_MESSAGES,
    MODEL_ROLES,
    TRANSCRIPT_ROLES,
    append_message,
    append_model_messages,
    model_messages,
    read_history,
    transcript,
    transcript_lines,
)
from switchboard.conversations.identities import (
    BSUID_PROFILE_KEY,
    Identity,
    ResolvedCustomer,
    active_identities,
    change_identity,
    channel_identities,
    customer_reply_address,
    reply_address,
    resolve_customer,
)
from switchboard.conversations.lifecycle import (
    Actor,
    InvalidTransition,
    back_to_ai,
    close,
    events_of,
    open_conversation,
    reassign,
    reopen,
    start_conversation,
    to_agent_console,
    to_console_user,
    to_human,
)
from switchboard.conversations.notes import NOTE_MAX_CHARS, add_note, notes_of

__all__ = [
    "BSUID_PROFILE_KEY",
    "HISTORY_MAX_MESSAGES",
    "NOTE_MAX_CHARS",
    "add_note",
    "notes_of",
    "MODEL_ROLES",
    "TRANSCRIPT_ROLES",
    "Actor",
    "Identity",
    "InvalidTransition",
    "ResolvedCustomer",
    "active_identities",
    "append_message",
    "append_model_messages",
    "back_to_ai",
    "change_identity",
    "channel_identities",
    "close",
    "events_of",
    "model_messages",
    "open_conversation",
    "read_history",
    "reassign",
    "reopen",
    "customer_reply_address",
    "reply_address",
    "resolve_customer",
    "start_conversation",
    "to_agent_console",
    "to_console_user",
    "to_human",
    "transcript",
    "transcript_lines",
]
