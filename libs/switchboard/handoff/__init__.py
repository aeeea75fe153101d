"""Human handoff over WhatsApp (docs/human-agents.md): agents, assignment, commands, the silent proxy."""

from switchboard.handoff.agents import (
    AgentBusy,
    AgentExists,
    AgentNotFound,
    add_agent,
    agent_by_phone,
    find_agent,
    list_agents,
    normalize_phone,
    remove_agent,
)
from switchboard.handoff.assignment import (
    Assignment,
    escalate,
    open_conversations_of,
    pick_agent,
    queue_length,
    release,
    take_queue,
    tenant_handoff_lock,
)
from switchboard.handoff.commands import (
    COMMANDS,
    HANDED_BACK_NOTE,
    HELP_TEXT,
    Command,
    CommandError,
    parse_command,
    run_command,
    selected_conversation,
    set_status,
)
from switchboard.handoff.notices import Outgoing, customer_label, write_outgoing
from switchboard.handoff.service import escalate_and_notify, notices_for_assignments
from switchboard.handoff.summary import HANDOFF_SUMMARY_INSTRUCTION, write_handoff_summary

__all__ = [
    "COMMANDS",
    "HANDED_BACK_NOTE",
    "HELP_TEXT",
    "Command",
    "CommandError",
    "parse_command",
    "run_command",
    "selected_conversation",
    "set_status",
    "AgentExists",
    "AgentBusy",
    "AgentNotFound",
    "remove_agent",
    "Assignment",
    "HANDOFF_SUMMARY_INSTRUCTION",
    "Outgoing",
    "add_agent",
    "agent_by_phone",
    "customer_label",
    "escalate",
    "escalate_and_notify",
    "find_agent",
    "list_agents",
    "normalize_phone",
    "notices_for_assignments",
    "open_conversations_of",
    "pick_agent",
    "queue_length",
    "release",
    "take_queue",
    "tenant_handoff_lock",
    "write_handoff_summary",
    "write_outgoing",
]
