"""Re-encrypting every stored credential with the newest ``ENCRYPTION_KEY`` (``switchboard keys rotate``).

Where credentials are stored (each a :class:`~switchboard.crypto.CredentialCipher` token):

* ``channel_accounts.credentials_encrypted``: a channel's access token (WhatsApp, ...);
* ``tenants.settings_extensions.llm.deployments[].api_key_encrypted`` (and ``llm.transcription[]``,
  ``llm.vision[]``): a tenant's model provider keys;
* ``tenants.settings_extensions.knowledge.embedding_api_key_encrypted``: a tenant's embedding key;
* ``webhook_endpoints.secret_encrypted``: an event webhook endpoint's signing secret.

:func:`rotate_credentials` re-encrypts all of them in the caller's transaction, with the rows
locked (``FOR UPDATE``) so an admin change cannot interleave. A value that no configured key
decrypts stops the rotation with its location, and the caller rolls back: nothing is half-rotated.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.crypto import CredentialCipher, CredentialDecryptError
from switchboard.db.models import ChannelAccount, Tenant, WebhookEndpoint, utcnow
from switchboard.db.tenant_scope import TenantScope
from switchboard.observability import get_logger

__all__ = ["RotationReport", "UnreadableCredential", "rotate_credentials"]

log = get_logger(__name__)

_LLM_SECTION = "llm"
_LLM_LISTS = ("deployments", "transcription", "vision")
"""The lists of model deployments in the ``llm`` section, each holding its own keys."""
_KNOWLEDGE_SECTION = "knowledge"
"""Sections of ``tenants.settings_extensions`` that hold credentials (:mod:`switchboard.tenant_settings`).
The rotation edits the stored JSON as it is (no validation, no defaults filled in): only the tokens change."""


class UnreadableCredential(CredentialDecryptError):
    """A stored credential that none of the configured keys decrypts (nothing was rotated)."""

    def __init__(self, where: str) -> None:
        self.where = where
        super().__init__(
            f"cannot decrypt {where} with any ENCRYPTION_KEY: add the key it was encrypted with "
            "(comma-separated, after the new one) and run the rotation again"
        )


@dataclass(kw_only=True)
class RotationReport:
    """How many credentials were re-encrypted, by where they are stored."""

    channel_accounts: int = 0
    llm_deployment_keys: int = 0
    embedding_keys: int = 0
    webhook_secrets: int = 0
    tenants: list[str] = field(default_factory=list)
    """Slugs of the tenants that had at least one credential."""

    @property
    def total(self) -> int:
        return self.channel_accounts + self.llm_deployment_keys + self.embedding_keys + self.webhook_secrets


def _rotate(cipher: CredentialCipher, token: str, where: str) -> str:
    try:
        return cipher.rotate(token)
    except CredentialDecryptError:
        raise UnreadableCredential(where) from None


async def rotate_credentials(session: AsyncSession, cipher: CredentialCipher) -> RotationReport:
    """Re-encrypt every stored credential with ``cipher``'s first key. The caller commits.

    Args:
        session: open session inside a transaction (``async with session.begin()``).
        cipher: every key that may have encrypted a stored value, the new one first.

    Returns:
        Counts per kind of credential.

    Raises:
        UnreadableCredential: a value no key decrypts (roll back: its location is in the message).
    """
    report = RotationReport()
    tenants = (await session.exec(select(Tenant).order_by(col(Tenant.slug)).with_for_update())).all()
    for tenant in tenants:
        before = report.total
        scope = TenantScope(session, tenant.id)
        accounts = await session.exec(
            scope.select(ChannelAccount, col(ChannelAccount.credentials_encrypted).is_not(None))
            .order_by(col(ChannelAccount.id))
            .with_for_update()
        )
        for account in accounts.all():
            where = f"tenant {tenant.slug}: {account.channel} account {account.external_account_id}"
            account.credentials_encrypted = _rotate(cipher, account.credentials_encrypted or "", where)
            account.updated_at = utcnow()
            report.channel_accounts += 1
        endpoints = await session.exec(
            scope.select(WebhookEndpoint).order_by(col(WebhookEndpoint.id)).with_for_update()
        )
        for endpoint in endpoints.all():
            where = f"tenant {tenant.slug}: webhook endpoint {endpoint.id}"
            endpoint.secret_encrypted = _rotate(cipher, endpoint.secret_encrypted, where)
            endpoint.updated_at = utcnow()
            report.webhook_secrets += 1
        extensions: dict[str, Any] = copy.deepcopy(tenant.settings_extensions or {})
        llm_section = extensions.get(_LLM_SECTION) or {}
        for list_name in _LLM_LISTS:
            for deployment in llm_section.get(list_name) or []:
                if not (isinstance(deployment, dict) and deployment.get("api_key_encrypted")):
                    continue
                label = "deployment" if list_name == "deployments" else list_name
                where = f"tenant {tenant.slug}: llm {label} {deployment.get('id')}"
                deployment["api_key_encrypted"] = _rotate(cipher, deployment["api_key_encrypted"], where)
                report.llm_deployment_keys += 1
        knowledge = extensions.get(_KNOWLEDGE_SECTION) or {}
        if knowledge.get("embedding_api_key_encrypted"):
            where = f"tenant {tenant.slug}: knowledge embedding key"
            knowledge["embedding_api_key_encrypted"] = _rotate(
                cipher, knowledge["embedding_api_key_encrypted"], where
            )
            report.embedding_keys += 1
        if report.total > before:
            tenant.settings_extensions = extensions  # a new dict so SQLAlchemy sees the change
            report.tenants.append(tenant.slug)
    await session.flush()
    log.info(
        "credentials_rotated",
        channel_accounts=report.channel_accounts,
        llm_deployment_keys=report.llm_deployment_keys,
        embedding_keys=report.embedding_keys,
        webhook_secrets=report.webhook_secrets,
        keys_configured=cipher.key_count,
    )
    return report
