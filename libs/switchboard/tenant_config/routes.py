"""Admin API for a tenant's settings: ``/v1/admin/tenants/{slug}/settings`` (``ADMIN_TOKEN`` bearer).

The same document ``switchboard tenant settings show`` prints (see :mod:`.document` for the shape
and how secrets are written); every change is validated whole and audited (``GET .../history``).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from fastapi import HTTPException, Query, status
from pydantic import BaseModel, Field, RootModel

from switchboard.api.access import Principal, PrincipalDep
from switchboard.api.deps import SessionDep, SessionsDep, SettingsDep, TenantDep
from switchboard.api.routers import tenant_admin_router
from switchboard.crypto import CredentialCipher
from switchboard.db.engine import session_scope
from switchboard.db.models import SettingsChange, Tenant
from switchboard.egress import EgressPolicy
from switchboard.settings import Settings
from switchboard.tenant_config.document import (
    SettingsInvalid,
    all_sections,
    effective_document,
    overrides_document,
)
from switchboard.tenant_config.service import list_settings_changes, patch_settings, save_settings
from switchboard.tenant_settings import tenant_settings_from
from switchboard.tenants import get_tenant

__all__ = [
    "settings_admin_router",
    "SettingsDocument",
    "SettingsView",
    "SettingsSaved",
    "SettingsChangePublic",
    "settings_problem",
]

settings_admin_router = tenant_admin_router("/settings", tags=["admin: settings"])

_EXAMPLE = {
    "agent": {"name": "Sam", "instructions": "Answer in two sentences at most."},
    "locale": {"language": "es"},
    "llm": {
        "deployments": [
            {"id": "main", "provider": "openai", "model": "gpt-4o-mini", "priority": 1, "api_key": "sk-..."},
            {
                "id": "backup",
                "provider": "anthropic",
                "model": "claude-haiku-4-5",
                "priority": 2,
                "api_key": "set",
            },
        ]
    },
}


class SettingsDocument(RootModel[dict[str, dict[str, Any]]]):
    """``{section: {setting: value}}``. Secrets (``api_key``, ``embedding_api_key``) are write-only: a new
    value is encrypted on the way in, ``"set"`` keeps the stored key (only while its deployment's provider
    and ``api_base``, or the embedding's base URL and provider, stay the same), ``null`` removes it."""

    model_config = {"json_schema_extra": {"examples": [_EXAMPLE]}}


class SettingsView(BaseModel):
    """A tenant's settings; secrets appear only as ``"set"`` / ``"not set"``."""

    tenant: str = Field(description="Tenant slug.")
    view: Literal["effective", "overrides"]
    language: str = Field(description="The tenant's ``locale.language``.")
    sections: dict[str, dict[str, Any]] = Field(
        description="effective: every section with defaults filled in; overrides: only what is stored."
    )


class SettingsChangePublic(BaseModel):
    """One audited change: who, when, and the changed sections before/after (secrets redacted)."""

    id: uuid.UUID
    actor: str
    source: str
    created_at: datetime
    sections: list[str]
    changed_paths: list[str]
    before: dict[str, Any]
    after: dict[str, Any]

    @classmethod
    def of(cls, change: SettingsChange) -> SettingsChangePublic:
        return cls.model_validate(change, from_attributes=True)


class SettingsSaved(BaseModel):
    """The result of a save: the audit row (``null`` when nothing changed) and the settings in force."""

    change: SettingsChangePublic | None
    settings: SettingsView


_PROBLEMS = {
    422: {
        "description": "Invalid settings; nothing changed. "
        '``{"detail": [{"path": "loop.max_tool_iterations", "message": "..."}]}``'
    }
}


def settings_problem(exc: SettingsInvalid) -> HTTPException:
    """The one 422 of a refused document: every problem with its path."""
    return HTTPException(
        status.HTTP_422_UNPROCESSABLE_CONTENT,
        [{"path": problem.path, "message": problem.message} for problem in exc.problems],
    )


def view_of(tenant: Tenant, view: Literal["effective", "overrides"] = "effective") -> SettingsView:
    """The :class:`SettingsView` of ``tenant`` (also used by the console)."""
    build = effective_document if view == "effective" else overrides_document
    return SettingsView(
        tenant=tenant.slug,
        view=view,
        language=tenant_settings_from(tenant.settings_extensions).locale.language,
        sections=build(tenant.settings_extensions),
    )


def cipher_factory(settings: Settings) -> Any:
    """``() -> CredentialCipher`` on ``ENCRYPTION_KEY``: built only when a new key is written."""
    return lambda: CredentialCipher(settings.secret("encryption_key").encode())


@settings_admin_router.get(
    "",
    response_model=SettingsView,
    summary="Read the tenant's settings",
    description="``view=effective`` (default): every section with its defaults (fixed customer texts in the "
    "tenant's language); ``view=overrides``: only what the tenant stored. Secrets show as set / not set.",
)
async def get_settings(
    tenant: TenantDep,
    view: Literal["effective", "overrides"] = Query("effective", description="effective or overrides"),
) -> SettingsView:
    return view_of(tenant, view)


@settings_admin_router.get(
    "/schema",
    summary="JSON Schema of every settings section",
    description="One JSON Schema per section (field types, limits, defaults, descriptions), for forms "
    "and editors. Stored secrets (``*_encrypted``) are written as the name without the suffix.",
)
async def get_settings_schema(tenant: TenantDep) -> dict[str, Any]:
    return {name: model.model_json_schema() for name, model in all_sections().items()}


def api_actor(principal: Principal) -> tuple[str, Literal["api", "console"]]:
    """``("api:admin-token", "api")``, ``("api:<email>", "api")`` (a user's API token) or
    ``("console:<email>", "console")`` (a logged-in browser)."""
    if principal.user is None:
        return "api:admin-token", "api"
    if principal.via == "session":
        return f"console:{principal.user.email}", "console"
    return f"api:{principal.user.email}", "api"


async def _save(
    tenant: Tenant, sessions: Any, settings: Settings, document: dict, principal: Principal, *, patch: bool
) -> SettingsSaved:
    actor, source = api_actor(principal)
    try:
        async with session_scope(sessions) as session:
            row = await get_tenant(session, str(tenant.id))
            saver = patch_settings if patch else save_settings
            change = await saver(
                session,
                row,
                document,
                actor=actor,
                source=source,
                cipher=cipher_factory(settings),
                egress=EgressPolicy.for_models(settings),
            )
            view = view_of(row)
    except SettingsInvalid as exc:
        raise settings_problem(exc) from None
    return SettingsSaved(change=SettingsChangePublic.of(change) if change else None, settings=view)


@settings_admin_router.put(
    "",
    response_model=SettingsSaved,
    responses=_PROBLEMS,
    summary="Replace the tenant's settings",
    description="The whole document: every section it names is replaced (validated with its defaults; "
    "values equal to a default are not stored), every section it leaves out goes back to its defaults. "
    "Audited when something changed.",
)
async def put_settings(
    body: SettingsDocument,
    tenant: TenantDep,
    sessions: SessionsDep,
    settings: SettingsDep,
    principal: PrincipalDep,
) -> SettingsSaved:
    document: dict[str, Any] = {name: {} for name in all_sections()}
    document.update(body.root)
    return await _save(tenant, sessions, settings, document, principal, patch=False)


@settings_admin_router.patch(
    "",
    response_model=SettingsSaved,
    responses=_PROBLEMS,
    summary="Change some settings",
    description="A JSON merge patch (RFC 7396) of the stored settings: mappings merge, ``null`` puts a "
    "setting back to its default, lists (``llm.deployments``) are replaced whole (``api_key: set`` keeps a "
    "deployment's stored key, matched by ``id``, unless its provider or ``api_base`` changes: then the key is "
    "dropped). The sections it touches are validated whole; audited.",
)
async def patch_settings_route(
    body: SettingsDocument,
    tenant: TenantDep,
    sessions: SessionsDep,
    settings: SettingsDep,
    principal: PrincipalDep,
) -> SettingsSaved:
    return await _save(tenant, sessions, settings, body.root, principal, patch=True)


class ProbePublic(BaseModel):
    """The result of one test call of a deployment."""

    ok: bool
    deployment_id: str
    answer: str | None
    error: str | None
    duration_ms: float


@settings_admin_router.post(
    "/deployments/{deployment_id}/test",
    response_model=ProbePublic,
    summary="Test one stored model deployment",
    description="One short completion through that deployment alone (its stored key, no retries, no "
    "fallback, 20 s budget); nothing is stored. A provider's failure is the answer (``ok: false``), not "
    "an HTTP error; so is a deployment that would go without a key (the platform's key goes only to the "
    "provider's official endpoint). 404: no deployment with that id.",
)
async def post_test_deployment(deployment_id: str, tenant: TenantDep, settings: SettingsDep) -> ProbePublic:
    from switchboard.tenant_config.probe import probe_deployment

    deployments = tenant_settings_from(tenant.settings_extensions).llm.deployments
    deployment = next((d for d in deployments if d.id == deployment_id), None)
    if deployment is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no deployment {deployment_id!r}")
    result = await probe_deployment(settings, deployment)
    return ProbePublic(**result.__dict__)


@settings_admin_router.post(
    "/media/{kind}/{deployment_id}/test",
    response_model=ProbePublic,
    summary="Test one stored voice message or picture model",
    description="``kind`` is ``transcription`` (one second of silence is transcribed: any answer, words "
    "or none, is a success) or ``vision`` (a one-pixel picture is described). Same rules as testing a "
    "chat deployment: that deployment alone, its stored key, nothing stored, a provider's failure is the "
    "answer (``ok: false``). 404: no such list or deployment.",
)
async def post_test_media_deployment(
    kind: str, deployment_id: str, tenant: TenantDep, settings: SettingsDep
) -> ProbePublic:
    from switchboard.tenant_config.probe import probe_deployment

    llm = tenant_settings_from(tenant.settings_extensions).llm
    if kind not in ("transcription", "vision"):
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no list of models {kind!r}")
    deployment = next((d for d in getattr(llm, kind) if d.id == deployment_id), None)
    if deployment is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no {kind} deployment {deployment_id!r}")
    result = await probe_deployment(
        settings, deployment, "transcription" if kind == "transcription" else "vision"
    )
    return ProbePublic(**result.__dict__)


@settings_admin_router.get(
    "/history",
    response_model=list[SettingsChangePublic],
    summary="Audit trail of settings changes",
    description="Newest first: who (``cli:<user>``, ``api:admin-token``, ``console:<email>``), when, which "
    "paths, and the changed sections before and after (secrets redacted).",
)
async def get_settings_history(
    tenant: TenantDep, session: SessionDep, limit: int = Query(50, ge=1, le=500)
) -> list[SettingsChangePublic]:
    return [SettingsChangePublic.of(c) for c in await list_settings_changes(session, tenant.id, limit=limit)]
