"""Console: the agent's settings as one validated form (``/t/{slug}/settings``), with its audit trail.

Every action has its admin API twin: the form saves what ``PUT /v1/admin/tenants/{slug}/settings``
would (the same :func:`~switchboard.tenant_config.save_settings`, audited with the console user as
actor), "test this deployment" is ``POST .../settings/deployments/{id}/test``. The form also tests
every new or changed deployment before it saves, unless it is saved anyway.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Request, status
from fastapi.responses import HTMLResponse, Response

from switchboard.api.access import ADMIN_ROLES
from switchboard.api.deps import SessionDep, SessionsDep, SettingsDep
from switchboard.console.app import register_nav, render
from switchboard.console.deps import PageContext, page_access
from switchboard.console.form_words import (
    ADVANCED_GROUPS,
    PROVIDERS,
    SECTION_WORDS,
    error_words,
    group_of,
    option_words,
    setting_path,
    words_for,
)
from switchboard.db.engine import session_scope
from switchboard.egress import EgressPolicy
from switchboard.i18n import N_, gettext
from switchboard.i18n.validation import localized_template
from switchboard.llm.config import TRANSCRIPTION_PROVIDERS, DeploymentSettings, default_deployments
from switchboard.privacy.retention import retention_preview
from switchboard.settings import Settings
from switchboard.tenant_config import (
    SettingsInvalid,
    effective_document,
    list_settings_changes,
    prepare_settings,
    save_settings,
)
from switchboard.tenant_config.document import Problem
from switchboard.tenant_config.form import FormField, FormSection, document_from_form, form_sections
from switchboard.tenant_config.probe import ProbeKind, ProbeResult, probe_deployment
from switchboard.tenant_config.routes import cipher_factory
from switchboard.tenant_settings import tenant_settings_from
from switchboard.tenants import get_tenant

__all__ = ["settings_pages_router", "console_actor"]

logger = logging.getLogger(__name__)
settings_pages_router = APIRouter(include_in_schema=False)
AdminPage = Annotated[PageContext, Depends(page_access(ADMIN_ROLES))]

register_nav("settings", N_("Agent settings"), "/settings", ADMIN_ROLES)


NO_ROW_ID = N_("Give the deployment an id and a model first.")
_RETENTION_WORDS = (
    N_("messages"),
    N_("outbox"),
    N_("memory"),
    N_("traces"),
    N_("tool receipts"),
    N_("security alerts"),
    N_("leads"),
    N_("event deliveries"),
    N_("kept"),
)
"""What the retention preview names (``_(kind)`` in settings.html)."""
"""A test of a row without an id (shown translated by ``_probe.html``)."""


def console_actor(page: PageContext) -> str:
    """Audit actor of a console action: ``console:<email>``."""
    return f"console:{page.user.email}"


def answering_order(settings: Settings, stored: dict | None) -> tuple[list[DeploymentSettings], bool]:
    """The deployments that answer the tenant's customers, first one first (by priority, then id),
    and whether they are the platform's default (:func:`default_deployments`: the tenant has none)."""
    own = tenant_settings_from(stored).llm.deployments
    chosen = list(own) or default_deployments(settings)
    return sorted(chosen, key=lambda d: (d.priority, d.id)), not own


def _in_words(fields: list[FormField]) -> None:
    """Give every input its label and explanation from :data:`SETTING_WORDS` (msgids; the template
    translates them)."""
    for f in fields:
        words = words_for(f.name)
        if words is not None:
            f.label, f.help = words.label, words.help
        _in_words(f.children)
        for row in f.rows:
            _in_words(row)


MEDIA_LISTS = ("transcription", "vision")
"""The lists of media models (``llm.transcription``, ``llm.vision``) shown under the chat models."""


def _layout(
    sections: list[FormSection],
) -> tuple[FormField, list[FormField], list[tuple[str, str, list[FormField]]]]:
    """The model rows (``llm.deployments``), the media model rows (``llm.transcription``,
    ``llm.vision``) and every other input in its "Advanced" group, in the order of
    :data:`ADVANCED_GROUPS`: ``(deployments, media lists, [(group id, title, inputs), ...])``."""
    deployments = None
    media: dict[str, FormField] = {}
    grouped: dict[str, list[FormField]] = {group: [] for group, _, _ in ADVANCED_GROUPS}
    for section in sections:
        _in_words(section.fields)
        for f in section.fields:
            if f.name == "llm.deployments":
                deployments = f
            elif f.name.removeprefix("llm.") in MEDIA_LISTS and f.kind == "rows":
                media[f.name.removeprefix("llm.")] = f
                if f.name == "llm.transcription":  # a voice row offers only providers that transcribe
                    for cell in (c for row in f.rows for c in row if c.key == "provider"):
                        cell.options = [o for o in cell.options if o in TRANSCRIPTION_PROVIDERS]
            else:
                grouped[group_of(f.name)].append(f)
    assert deployments is not None  # LLMSettings always has its deployments
    return (
        deployments,
        [media[name] for name in MEDIA_LISTS if name in media],
        [(group, title, grouped[group]) for group, title, _ in ADVANCED_GROUPS if grouped[group]],
    )


def path_words(paths: list[str]) -> list[str]:
    """Changed setting paths (``llm.deployments``, ``agent``) in words (msgids, in order, once each)."""
    out: list[str] = []
    for path in paths:
        words = words_for(path)
        word = words.label if words is not None else SECTION_WORDS.get(setting_path(path).split(".")[0], path)
        if word not in out:
            out.append(word)
    return out


def problem_place(path: str, language: str, form: Mapping[str, str] | None = None) -> str:
    """Where a refused setting is, in words in ``language``: ``hours.schedule[0].opens`` -> "Monday,
    opens" (a row is named by its day, or a deployment by its id, as ``form`` has them; else "Opening
    hours, row 1"), ``agent.name`` -> "Agent's name". Never the path itself."""
    name = re.sub(r"\[(\d+)\]", r".\1", path)
    parts = name.split(".")
    rows = [index for index, part in enumerate(parts) if part.isdigit()]
    if not rows:
        return gettext(language, path_words([name])[0])
    at = rows[-1]
    row_name = ".".join(parts[: at + 1])
    typed = form or {}
    if typed.get(f"{row_name}.day"):
        day = gettext(language, option_words(f"{row_name}.day", typed[f"{row_name}.day"]))
        row = day[:1].upper() + day[1:]  # it starts the line: "lunes" -> "Lunes"
    elif typed.get(f"{row_name}.id", "").strip():
        row = typed[f"{row_name}.id"].strip()  # the deployment's name as the tenant wrote it
    else:
        whole = gettext(language, path_words([".".join(parts[:at])])[0])
        row = gettext(language, N_("%(setting)s, row %(n)s")) % {"setting": whole, "n": int(parts[at]) + 1}
    field = words_for(name) if at + 1 < len(parts) else None
    if field is None:
        return row
    label = gettext(language, field.label)
    if label[1:2].islower():  # "Opens" -> "opens", but "API key" stays
        label = label[0].lower() + label[1:]
    return f"{row}, {label}"


def problem_text(problem: Problem, language: str) -> str:
    """A refused setting's reason as the settings form shows it, in ``language``: a sentence, never a
    regular expression or a library's English (:func:`switchboard.console.form_words.error_words`)."""
    name = re.sub(r"\[(\d+)\]", r".\1", problem.path)
    has_words = (
        problem.error_type is None or localized_template(problem.error_type, problem.params) is not None
    )
    chosen = error_words(name, problem.error_type, has_words=has_words)
    if chosen is None:
        return problem.text(language)
    msgid, explain = chosen
    words = words_for(name)
    text = gettext(language, msgid)
    return f"{text} {gettext(language, words.help)}" if explain and words is not None else text


async def _render(
    request: Request,
    page: PageContext,
    session,
    *,
    problems=None,
    form=None,
    saved=None,
    code=200,
    settings: Settings,
    failed=(),
):  # type: ignore[no-untyped-def]
    tenant = page.tenant
    sections = form_sections(effective_document(tenant.settings_extensions), tenant.settings_extensions or {})
    if form is not None:  # re-show what was typed next to the problems
        for section in sections:
            for field in section.fields:
                _refill(field, form)
    deployments, media_lists, advanced = _layout(sections)
    history = await list_settings_changes(session, tenant.id, limit=20)
    preview = await retention_preview(await session.connection(), tenant, settings)
    groups: dict[int, list[str]] = {}
    for deployment in tenant_settings_from(tenant.settings_extensions).llm.deployments:
        groups.setdefault(deployment.priority, []).append(deployment.id)
    return render(
        request,
        "settings.html",
        status_code=code,
        tenant=tenant,
        deployments=deployments,
        media_lists=media_lists,
        advanced=advanced,
        history=history,
        providers=PROVIDERS,
        path_words=path_words,
        problem_place=problem_place,
        problem_text=problem_text,
        typed=form or {},
        open_advanced=bool(problems),
        problems=problems or [],
        saved=saved,
        groups=sorted(groups.items()),
        active="settings",
        answering=answering_order(settings, tenant.settings_extensions),
        failed=list(failed),
        retention_preview=preview,
    )


def _refill(field, form) -> None:  # type: ignore[no-untyped-def]
    if field.kind == "rows":
        for row in field.rows:
            for cell in row:
                _refill(cell, form)
    elif field.kind == "group":
        for child in field.children:
            _refill(child, form)
    elif field.kind == "checkbox":
        field.value = field.name in form
    elif field.kind != "secret" and field.name in form:
        field.value = form[field.name]


@settings_pages_router.get("/t/{slug}/settings", response_class=HTMLResponse)
async def settings_page(
    request: Request, page: AdminPage, session: SessionDep, settings: SettingsDep
) -> Response:
    """Every section of the tenant's settings as a form, which model answers now and its fallback
    order, the fallback groups, the last changes."""
    return await _render(request, page, session, settings=settings)


@settings_pages_router.post("/t/{slug}/settings", response_class=HTMLResponse)
async def settings_save(
    request: Request, page: AdminPage, session: SessionDep, sessions: SessionsDep, settings: SettingsDep
) -> Response:
    """Validate the whole form, test every new or changed deployment, and save it (audited).

    Problems are shown next to the form (422). A deployment whose test fails stops the save (422,
    the failure and the address tried shown) unless the form says ``save_anyway``; unchanged
    deployments are not tested again.
    """
    form = {k: str(v) for k, v in (await request.form()).multi_items() if k != "csrf_token"}
    tenant = page.tenant
    sections = form_sections(effective_document(tenant.settings_extensions), tenant.settings_extensions or {})
    document = document_from_form(sections, form)
    if not form.get("save_anyway"):
        try:
            failed = await _failing_deployments(settings, tenant.settings_extensions or {}, document)
        except SettingsInvalid as exc:
            return await _render(
                request, page, session, problems=exc.problems, form=form, code=422, settings=settings
            )
        if failed:
            logger.info("settings not saved: %d deployment(s) failed their test", len(failed))
            return await _render(
                request, page, session, form=form, code=422, settings=settings, failed=failed
            )
    try:
        async with session_scope(sessions) as write:
            row = await get_tenant(write, str(tenant.id))
            change = await save_settings(
                write,
                row,
                document,
                actor=console_actor(page),
                source="console",
                cipher=cipher_factory(settings),
                egress=EgressPolicy.for_models(settings),
            )
    except SettingsInvalid as exc:
        return await _render(
            request, page, session, problems=exc.problems, form=form, code=422, settings=settings
        )
    fresh = PageContext(info=page.info, tenant=await get_tenant(session, str(tenant.id)))
    await session.refresh(fresh.tenant)
    return await _render(
        request, fresh, session, saved=change.changed_paths if change else [], settings=settings
    )


async def _failing_deployments(settings: Settings, stored: dict, document: dict) -> list[ProbeResult]:
    """The failed tests of the deployments ``document`` adds or changes (compared with ``stored``
    by id, keys included), chat, voice message and picture models alike. Raises
    :class:`SettingsInvalid` when the document is invalid."""
    prepared = prepare_settings(stored, document, cipher=cipher_factory(settings))
    old_llm, new_llm = tenant_settings_from(stored).llm, tenant_settings_from(prepared).llm
    failed = []
    lists: tuple[tuple[str, ProbeKind], ...] = (
        ("deployments", "chat"),
        ("transcription", "transcription"),
        ("vision", "vision"),
    )
    for list_name, kind in lists:
        before = {d.id: d for d in getattr(old_llm, list_name)}
        for deployment in getattr(new_llm, list_name):
            if before.get(deployment.id) == deployment:
                continue  # unchanged: it was tested (or saved anyway) before
            result = await probe_deployment(settings, deployment, kind)
            if not result.ok:
                failed.append(result)
    return failed


@settings_pages_router.post("/t/{slug}/settings/deployments/row/{row}/test", response_class=HTMLResponse)
async def settings_test_row(request: Request, row: int, page: AdminPage, settings: SettingsDep) -> Response:
    """ "Test this deployment" of row ``row`` as typed (a new row included: its id is read from the
    posted form); the answer (or the error) as a small fragment."""
    form = {k: str(v) for k, v in (await request.form()).multi_items() if k != "csrf_token"}
    deployment_id = form.get(f"llm.deployments.{row}.id", "").strip()
    if not deployment_id:
        return render(
            request,
            "_probe.html",
            tenant=page.tenant,
            result=_refused(str(row + 1), NO_ROW_ID),
        )
    return await settings_test_deployment(request, deployment_id, page, settings)


@settings_pages_router.post(
    "/t/{slug}/settings/deployments/{deployment_id}/test", response_class=HTMLResponse
)
async def settings_test_deployment(
    request: Request, deployment_id: str, page: AdminPage, settings: SettingsDep
) -> Response:
    """One short call of the deployment as the form shows it now (unsaved edits included; the button
    posts the form), else as stored; the answer (or the error) as a small fragment.

    The form's values go through the same rules as a save (:func:`prepare_settings`): a key kept
    from storage goes only to the address it was given for, so a changed ``api_base`` or provider is
    tested without it (or with a key typed in the same form).
    """
    form = {k: str(v) for k, v in (await request.form()).multi_items() if k != "csrf_token"}
    deployment = None
    if any(name.startswith("llm.deployments.") for name in form):
        deployment = _form_deployment(page, form, deployment_id, settings)
        if isinstance(deployment, str):
            return render(
                request, "_probe.html", tenant=page.tenant, result=_refused(deployment_id, deployment)
            )
    else:
        deployments = tenant_settings_from(page.tenant.settings_extensions).llm.deployments
        deployment = next((d for d in deployments if d.id == deployment_id), None)
    if deployment is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no deployment {deployment_id!r}: save it first")
    result = await probe_deployment(settings, deployment)
    return render(request, "_probe.html", tenant=page.tenant, result=result)


@settings_pages_router.post("/t/{slug}/settings/media/{kind}/row/{row}/test", response_class=HTMLResponse)
async def settings_test_media_row(
    request: Request, kind: str, row: int, page: AdminPage, settings: SettingsDep
) -> Response:
    """ "Test this model" of row ``row`` of the transcription or vision list as typed (unsaved edits
    included, stored keys only for an unchanged address, as a save would keep them): a second of
    silence transcribed, or a one-pixel picture described; the answer (or the error) as a fragment."""
    if kind not in MEDIA_LISTS:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no list of models {kind!r}")
    form = {k: str(v) for k, v in (await request.form()).multi_items() if k != "csrf_token"}
    deployment_id = form.get(f"llm.{kind}.{row}.id", "").strip()
    if not deployment_id:
        return render(request, "_probe.html", tenant=page.tenant, result=_refused(str(row + 1), NO_ROW_ID))
    deployment = _form_deployment(page, form, deployment_id, settings, list_name=kind)
    if isinstance(deployment, str):
        return render(request, "_probe.html", tenant=page.tenant, result=_refused(deployment_id, deployment))
    if deployment is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no deployment {deployment_id!r}")
    result = await probe_deployment(
        settings, deployment, "transcription" if kind == "transcription" else "vision"
    )
    return render(request, "_probe.html", tenant=page.tenant, result=result)


def _refused(deployment_id: str, why: str) -> ProbeResult:
    return ProbeResult(ok=False, deployment_id=deployment_id, error=why)


def _form_deployment(
    page: PageContext,
    form: dict[str, str],
    deployment_id: str,
    settings: Settings,
    *,
    list_name: str = "deployments",
) -> DeploymentSettings | str | None:
    """The deployment ``deployment_id`` of ``llm.<list_name>`` as the submitted form has it (stored
    keys kept only for an unchanged address), ``None`` when the form has no such row, or the problem
    text when invalid."""
    stored = page.tenant.settings_extensions or {}
    sections = [s for s in form_sections(effective_document(stored), stored) if s.name == "llm"]
    document = document_from_form(sections, form)
    try:
        prepared = prepare_settings(stored, document, cipher=cipher_factory(settings))
    except SettingsInvalid as exc:
        return "; ".join(str(problem) for problem in exc.problems)[:500]
    llm = tenant_settings_from(prepared).llm
    return next((d for d in getattr(llm, list_name) if d.id == deployment_id), None)
