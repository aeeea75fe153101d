"""Memory across conversations (docs/concepts.md#memory): summaries into ``user_memories``, returning customers,
and the checks on model-written notes about a customer (:mod:`switchboard.memory.notes`)."""

from switchboard.memory.jobs import memory_sweep, summarize_memory
from switchboard.memory.notes import NotesRejected, check_customer_text, check_notes, evidence_from_notes
from switchboard.memory.store import (
    MEMORY_INSTRUCTION,
    close_idle_conversations,
    conversations_to_summarize,
    is_returning_customer,
    summarize_into_memory,
)

__all__ = [
    "MEMORY_INSTRUCTION",
    "NotesRejected",
    "check_customer_text",
    "check_notes",
    "evidence_from_notes",
    "close_idle_conversations",
    "conversations_to_summarize",
    "is_returning_customer",
    "memory_sweep",
    "summarize_into_memory",
    "summarize_memory",
]
