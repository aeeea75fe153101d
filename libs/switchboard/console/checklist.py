"""The setup checklist of a tenant's home page: what is left before customers can write in.

Every step is read from the database each time the page opens (never a remembered click):

* **channel**: an active channel account, and a message received on it (the webhook works);
* **model**: the tenant's own model deployments, and an answer from one of them;
* **knowledge**: documents read and active;
* **people**: a human agent (WhatsApp) or a console user with the agent role;
* **test**: a conversation the assistant answered.

A channel account on this deployment's sandbox and the offline demo model are for trying things out:
with nothing else, their step is "testing only" (not done) and links to the real step.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import Tenant
from switchboard.i18n import N_
from switchboard.llm.config import default_deployments
from switchboard.settings import Settings
from switchboard.tenant_settings import tenant_settings_from

__all__ = ["SetupStep", "setup_checklist"]


@dataclass(frozen=True)
class SetupStep:
    """One line of the checklist.

    Attributes:
        key: stable id (``channel``, ``model``, ``knowledge``, ``people``, ``test``).
        title: what to do (an English msgid, translated by the template).
        done: whether the database shows it done.
        testing: done with a stand-in only (the sandbox, the offline model): not done, and
            ``real_step`` (a msgid) names what to do instead at ``path``.
        state: what the database shows (msgid with ``%(name)s`` placeholders filled from ``values``).
        path: the page under ``/t/{slug}`` where it is done.
    """

    key: str
    title: str
    done: bool
    state: str
    path: str
    values: dict[str, Any] = field(default_factory=dict)
    testing: bool = False
    real_step: str = ""


_ACCOUNTS = text(
    """
    SELECT a.channel, a.api_base_url, EXISTS
        (SELECT 1 FROM messages m WHERE m.channel_account_id = a.id AND m.direction = 'inbound') AS receiving
    FROM channel_accounts a WHERE a.tenant_id = :tenant AND a.is_active
    """
)
_COUNTS = text(
    """
    SELECT
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


async def setup_checklist(session: AsyncSession, tenant: Tenant, settings: Settings) -> list[SetupStep]:
    """The tenant's checklist, in the order a business sets up (business hours come when they exist);
    ``settings`` says which channel accounts talk to this deployment's sandbox."""
    tenant_id: uuid.UUID = tenant.id
    counts = (await session.execute(_COUNTS, {"tenant": tenant_id})).mappings().one()
    accounts = (await session.execute(_ACCOUNTS, {"tenant": tenant_id})).mappings().all()
    real = [a for a in accounts if not settings.account_on_sandbox(a["channel"], a["api_base_url"])]
    steps: list[SetupStep] = []

    testing = bool(accounts) and not real
    if any(a["receiving"] for a in real):
        state = N_("Connected and receiving messages.")
    elif real:
        state = N_("Connected, but no message has arrived yet: send one from your own phone to check it.")
    elif testing:
        state = N_("Only the sandbox is connected: it is for testing, customers cannot reach it.")
    else:
        state = N_("No channel connected yet.")
    steps.append(
        SetupStep(
            "channel",
            N_("Connect a channel and check it"),
            any(a["receiving"] for a in real),
            state,
            "/channels",
            testing=testing,
            real_step=N_("Connect a real channel") if testing else "",
        )
    )

    deployments = tenant_settings_from(tenant.settings_extensions).llm.deployments
    own = [d.id for d in deployments if d.provider != "offline"]
    answered_by = None
    if own:
        answered_by = (
            await session.execute(_ANSWERED_BY, {"tenant": tenant_id, "models": own})
        ).scalar_one_or_none()
    # no model added: the platform's defaults answer, which are the offline demo model unless the
    # operator set a provider key
    on_offline_default = not deployments and all(
        d.provider == "offline" for d in default_deployments(settings)
    )
    testing = (bool(deployments) and not own) or on_offline_default
    if answered_by:
        model_state, values = N_("Configured; %(model)s has answered."), {"model": answered_by}
    elif own:
        model_state, values = N_("Configured, not answered with yet: send a test message."), {}
    elif on_offline_default:
        model_state, values = (
            N_(
                "No model added: the offline demo model answers for now. It is for testing, it does not "
                "understand customers."
            ),
            {},
        )
    elif testing:
        model_state, values = (
            N_("Only the offline demo model is set up: it is for testing, it does not understand customers."),
            {},
        )
    else:
        model_state, values = N_("Not configured: the platform's default model answers for now."), {}
    steps.append(
        SetupStep(
            "model",
            N_("Set up your model and test it"),
            bool(answered_by),
            model_state,
            "/settings",
            values,
            testing=testing,
            real_step=N_("Add a real model") if testing else "",
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
