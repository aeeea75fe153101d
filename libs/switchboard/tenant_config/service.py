"""Reading and saving a tenant's settings with an audit row per change (CLI, admin API, console).

Every write goes through :func:`save_settings`: the tenant row is locked (``FOR UPDATE``) so two
saves never lose each other's change, the new document is validated whole
(:func:`~switchboard.tenant_config.document.prepare_settings`), and when something changed one
:class:`~switchboard.db.models.SettingsChange` row records who, when, and the changed sections before
and after with secrets redacted. The caller commits (one transaction with the audit row).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any, Literal

from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.crypto import CredentialCipher
from switchboard.db.models import SettingsChange, Tenant, utcnow
from switchboard.egress import EgressPolicy, EgressRefused
from switchboard.observability import get_logger
from switchboard.tenant_config.document import (
    Problem,
    SettingsInvalid,
    merge_patch,
    overrides_document,
    prepare_settings,
    redacted_sections,
    set_path,
)

__all__ = [
    "Source",
    "save_settings",
    "patch_settings",
    "assign_settings",
    "list_settings_changes",
    "tenant_urls",
]

log = get_logger(__name__)

Source = Literal["cli", "api", "console"]


async def _locked(session: AsyncSession, tenant: Tenant) -> Tenant:
    row = (
        await session.exec(
            select(Tenant)
            .where(col(Tenant.id) == tenant.id)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
    ).one()
    return row


def tenant_urls(extensions: Mapping[str, Any]) -> dict[str, str]:
    """The outbound URLs a tenant's stored settings name, by path: each model deployment's
    ``api_base`` (``llm.deployments[id].api_base``, ``llm.transcription[id].api_base``,
    ``llm.vision[id].api_base``) and ``knowledge.embedding_api_base``."""
    urls: dict[str, str] = {}
    llm = extensions.get("llm") if isinstance(extensions.get("llm"), Mapping) else {}
    for list_name in ("deployments", "transcription", "vision"):
        for deployment in (llm or {}).get(list_name) or []:
            if isinstance(deployment, Mapping) and deployment.get("api_base"):
                urls[f"llm.{list_name}[{deployment.get('id')}].api_base"] = str(deployment["api_base"])
    knowledge = extensions.get("knowledge") if isinstance(extensions.get("knowledge"), Mapping) else {}
    if (knowledge or {}).get("embedding_api_base"):
        urls["knowledge.embedding_api_base"] = str(knowledge["embedding_api_base"])  # type: ignore[index]
    return urls


async def _check_urls(before: Mapping[str, Any], after: Mapping[str, Any], egress: EgressPolicy) -> None:
    """Every URL ``after`` adds or changes passes the outbound-address policy.

    Raises:
        SettingsInvalid: one problem per refused URL, at its path, saying why in plain words.
    """
    old = tenant_urls(before)
    problems = []
    for path, url in tenant_urls(after).items():
        if old.get(path) == url:
            continue
        try:
            await egress.check(url)
        except EgressRefused as exc:
            problems.append(Problem(path, str(exc)))
    if problems:
        raise SettingsInvalid(problems)


async def save_settings(
    session: AsyncSession,
    tenant: Tenant,
    document: Mapping[str, Any],
    *,
    actor: str,
    source: Source,
    cipher: Callable[[], CredentialCipher],
    egress: EgressPolicy,
) -> SettingsChange | None:
    """Store the sections named in ``document`` (public shape, see :mod:`.document`); the caller commits.

    Returns:
        The audit row, or ``None`` when nothing changed (no row is written).

    Args:
        egress: the outbound-address policy every new or changed URL (a model or embedding
            ``api_base``) must pass (:func:`tenant_urls`).

    Raises:
        SettingsInvalid: every problem with its path; nothing changed.
    """
    tenant = await _locked(session, tenant)
    before = dict(tenant.settings_extensions or {})
    after = prepare_settings(before, document, cipher=cipher)
    await _check_urls(before, after, egress)
    sections, paths, old_public, new_public = redacted_sections(before, after)
    if not sections:
        return None
    tenant.settings_extensions = after  # a new dict so SQLAlchemy sees the change
    tenant.updated_at = utcnow()
    change = SettingsChange(
        tenant_id=tenant.id,
        actor=actor[:200],
        source=source,
        sections=sections,
        changed_paths=paths,
        before=old_public,
        after=new_public,
    )
    session.add(change)
    await session.flush()
    log.info(
        "tenant_settings_changed",
        tenant_id=str(tenant.id),
        actor=actor,
        source=source,
        sections=sections,
        changed_paths=paths,
    )
    return change


async def patch_settings(
    session: AsyncSession,
    tenant: Tenant,
    patch: Mapping[str, Any],
    *,
    actor: str,
    source: Source,
    cipher: Callable[[], CredentialCipher],
    egress: EgressPolicy,
) -> SettingsChange | None:
    """:func:`save_settings` of ``patch`` merged (RFC 7396) into what the tenant stores now.

    ``{"agent": {"name": "Sam", "system_prompt": null}}`` sets the name and puts the system prompt
    back to its default; lists (``llm.deployments``) are replaced whole; ``"set"`` keeps a key.
    """
    current = overrides_document(tenant.settings_extensions)
    merged = merge_patch(current, patch)
    touched = {name: merged.get(name, {}) for name in patch}
    return await save_settings(
        session, tenant, touched, actor=actor, source=source, cipher=cipher, egress=egress
    )


async def assign_settings(
    session: AsyncSession,
    tenant: Tenant,
    assignments: Mapping[str, Any],
    *,
    actor: str,
    source: Source,
    cipher: Callable[[], CredentialCipher],
    egress: EgressPolicy,
) -> SettingsChange | None:
    """Set dotted paths (``{"agent.name": "Sam", "llm.deployments[main].api_key": "sk-..."}``); ``None``
    puts a setting back to its default. See :func:`~switchboard.tenant_config.document.set_path`."""
    current = overrides_document(tenant.settings_extensions)
    touched: set[str] = set()
    for path, value in assignments.items():
        set_path(current, path, value)
        touched.add(path.split(".")[0].split("[")[0])
    return await save_settings(
        session,
        tenant,
        {name: current.get(name, {}) for name in touched},
        actor=actor,
        source=source,
        cipher=cipher,
        egress=egress,
    )


async def list_settings_changes(
    session: AsyncSession, tenant_id: uuid.UUID, *, limit: int = 50
) -> list[SettingsChange]:
    """The tenant's settings changes, newest first (at most ``limit``)."""
    rows = await session.exec(
        select(SettingsChange)
        .where(col(SettingsChange.tenant_id) == tenant_id)
        .order_by(col(SettingsChange.created_at).desc(), col(SettingsChange.id))
        .limit(limit)
    )
    return list(rows.all())
