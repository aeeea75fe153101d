"""The conversation page's history in words, for every kind of lifecycle event, in English and Spanish."""

from __future__ import annotations

import uuid

import pytest
from switchboard.console.app import _history_words
from switchboard.console.inbox import history_line
from switchboard.db.models import ConversationEvent, utcnow

NIA, PAT = uuid.uuid4(), uuid.uuid4()
AGENTS, USERS = {str(NIA): "Nia"}, {str(PAT): "Pat"}


def _event(before, to, actor, actor_id=None, agent=None, reason=None) -> ConversationEvent:  # type: ignore[no-untyped-def]
    return ConversationEvent(
        tenant_id=uuid.uuid4(),
        conversation_id=uuid.uuid4(),
        from_status=before,
        to_status=to,
        actor_type=actor,
        actor_id=str(actor_id) if actor_id else None,
        agent_id=agent,
        reason=reason,
        created_at=utcnow(),
    )


@pytest.mark.parametrize(
    ("event", "english", "spanish"),
    [
        (_event(None, "ai", "customer"), "Conversation started", "Conversación iniciada"),
        (_event("ai", "human", "ai", agent=NIA), "The AI handed it to Nia", "La IA se la pasó a Nia"),
        (
            _event("ai", "human", "customer", agent=NIA),
            "The customer asked for a person: Nia has it",
            "El cliente pidió una persona: la tiene Nia",
        ),
        (
            _event("ai", "human", "ai"),
            "The AI asked for a person: waiting for one",
            "La IA pidió una persona: esperando a una",
        ),
        (_event("human", "human", "agent", NIA, agent=NIA), "Nia took it", "Nia la tomó"),
        (
            _event(
                "ai", "human", "console_user", PAT, reason="given in the console by Pat to the team Billing"
            ),
            "Pat gave it to the team Billing: waiting for one of its agents",
            "Pat la dio al equipo Billing: esperando a uno de sus agentes",
        ),
        (
            _event("human", "human", "console_user", PAT, agent=NIA),
            "Pat transferred it to Nia",
            "Pat la transfirió a Nia",
        ),
        (
            _event("ai", "human", "console_user", PAT, agent=NIA),
            "Pat assigned it to Nia",
            "Pat la asignó a Nia",
        ),
        (
            _event("ai", "human", "console_user", PAT, reason="taken over in the console by Pat"),
            "Pat took over",
            "Pat tomó el control",
        ),
        (
            _event("human", "human", "console_user", PAT, reason="transferred in the console by Ana to Pat"),
            "Assigned to Pat",
            "Asignada a Pat",
        ),
        (_event("human", "ai", "agent", NIA), "Handed back to the AI by Nia", "Devuelta a la IA por Nia"),
        (
            _event("human", "ai", "api"),
            "Handed back to the AI by the admin API",
            "Devuelta a la IA por la API de administración",
        ),
        (
            _event("ai", "closed", "system"),
            "Closed after a time without messages",
            "Cerrada tras un tiempo sin mensajes",
        ),
        (_event("ai", "closed", "console_user", PAT), "Closed by Pat", "Cerrada por Pat"),
        (
            _event("closed", "ai", "console_user", uuid.uuid4()),
            "Reopened by a person",
            "Reabierta por una persona",
        ),
    ],
)
def test_each_event_reads_as_words(event, english, spanish):
    line = history_line(event, AGENTS, USERS)
    assert _history_words({"lang": "en"}, line) == english
    assert _history_words({"lang": "es"}, line) == spanish
