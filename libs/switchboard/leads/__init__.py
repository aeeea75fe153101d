"""Lead capture (docs/integrations.md#leads): an after-turn intent check records one lead per conversation."""

from switchboard.leads.capture import (
    OFFLINE_HEURISTIC,
    capture_lead,
    capture_lead_in,
    heuristic_may_find_intent,
    lead_recorded,
    list_leads,
    stage_lead_created,
)
from switchboard.leads.intent import IntentVerdict, heuristic_intent

__all__ = [
    "OFFLINE_HEURISTIC",
    "IntentVerdict",
    "capture_lead",
    "capture_lead_in",
    "heuristic_intent",
    "heuristic_may_find_intent",
    "lead_recorded",
    "list_leads",
    "stage_lead_created",
]
