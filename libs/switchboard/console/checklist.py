"""The setup checklist of a tenant's home page: what is left before customers can write in.

Every step is read from the database each time the page opens (never a remembered click):

* **channel**: an active channel account, and a message received on it (the webhook works);
* **model**: the tenant's own model deployments, and an answer from one of them;
* **knowledge**: documents read and active;
* **people**: a human agent (WhatsApp) or a console user with the agent role;
* **test**: a conversation the assistant answered.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import Tenant
from switchboard.i18n import N_
from switchboard.tenant_settings import tenant_settings_from

__all__ = ["SetupStep", "setup_checklist"]


@dataclass(frozen=True)
class SetupStep:
    """One line of the checklist.

    Attributes:
        key: stable id (``channel``, ``model``, ``knowledge``, ``people``, ``test``).
        title: what to do (an English msgid, translated by the template).
        done: whether the database shows it done.
        state: what the database shows (msgid with ``%(name)s`` placeholders filled from ``values``).
        path: the page under ``/t/{slug}`` where it is done.
    """

    key: str
    title: str
    done: bool
    state: str
    path: str
    values: dict[str, Any] = field(default_factory=dict)


_COUNTS = text(
    """
    SELECT
      (SELECT count(*) FROM channel_accounts a WHERE a.tenant_id = :tenant AND a.is_active) AS channels,
      (SELECT count(*) FROM channel_accounts a WHERE a.tenant_id = :tenant AND a.is_active AND EXISTS
          (SELECT 1 FROM messages m WHERE m.channel_account_id = a.id AND m.direction = 'inbound'))
          AS channels_receiving,
      (SELECT count(*) FROM knowledge_sources s WHERE s.tenant_id = :tenant AND s.is_active
          AND s.status = 'ready') AS documents_ready,
      (SELECT count(*) FROM knowledge_sources s WHERE s.tenant_id = :tenant
          AND s.status IN ('pending', 'processing')) AS documents_reading,
      (SELECT count(*) FROM human_agents h WHERE h.tenant_id = :tenant) AS whatsapp_agents,
      (SELECT count(*) FROM console_users u WHERE u.tenant_id = :tenant AND u.role = 'agent'
          AND u.is_active) AS console_agents,
      (SELECT count(*) FROM turns t WHERE t.tenant_id = :tenant AND t.status = 'done'
          AND t.outcome = 'answered') AS answered
    """
)
_ANSWERED_BY = text(
    """
    SELECT t.model FROM turns t WHERE t.tenant_id = :tenant AND t.status = 'done' AND t.outcome = 'answered'
      AND t.model = ANY(:models) ORDER BY t.created_at DESC LIMIT 1
    """
)


async def setup_checklist(session: AsyncSession, tenant: Tenant) -> list[SetupStep]:
    """The tenant's checklist, in the order a business sets up (business hours come when they exist)."""
    tenant_id: uuid.UUID = tenant.id
    counts = (await session.execute(_COUNTS, {"tenant": tenant_id})).mappings().one()
    steps: list[SetupStep] = []

    if counts["channels_receiving"]:
        state = N_("Connected and receiving messages.")
    elif counts["channels"]:
        state = N_("Connected, but no message has arrived yet: send one from your own phone to check it.")
    else:
        state = N_("No channel connected yet.")
    steps.append(
        SetupStep(
            "channel",
            N_("Connect a channel and check it"),
            bool(counts["channels_receiving"]),
            state,
            "/channels",
        )
    )

    deployments = [d.id for d in tenant_settings_from(tenant.settings_extensions).llm.deployments]
    answered_by = None
    if deployments:
        answered_by = (
            await session.execute(_ANSWERED_BY, {"tenant": tenant_id, "models": deployments})
        ).scalar_one_or_none()
    if answered_by:
        model_state, values = N_("Configured; %(model)s has answered."), {"model": answered_by}
    elif deployments:
        model_state, values = N_("Configured, not answered with yet: send a test message."), {}
    else:
        model_state, values = N_("Not configured: the platform's default model answers for now."), {}
    steps.append(
        SetupStep(
            "model", N_("Set up your model and test it"), bool(answered_by), model_state, "/settings", values
        )
    )

    if counts["documents_ready"]:
        kb_state = N_("%(n)s document(s) ready.")
    elif counts["documents_reading"]:
        kb_state = N_("%(n)s document(s) still being read.")
    else:
        kb_state = N_("No documents yet.")
    steps.append(
        SetupStep(
            "knowledge",
            N_("Upload what the assistant should know"),
            bool(counts["documents_ready"]),
            kb_state,
            "/knowledge",
            {"n": counts["documents_ready"] or counts["documents_reading"]},
        )
    )

    agents = int(counts["whatsapp_agents"]) + int(counts["console_agents"])
    steps.append(
        SetupStep(
            "people",
            N_("Add a person who takes over from the assistant"),
            agents > 0,
            N_("%(n)s agent(s).") if agents else N_("Nobody yet."),
            "/people",
            {"n": agents},
        )
    )

    steps.append(
        SetupStep(
            "test",
            N_("Have a test conversation"),
            bool(counts["answered"]),
            N_("The assistant has answered %(n)s message(s).")
            if counts["answered"]
            else N_("Nobody has talked to the assistant yet: write to your number from your own phone."),
            "/inbox",
            {"n": counts["answered"]},
        )
    )
    return steps
