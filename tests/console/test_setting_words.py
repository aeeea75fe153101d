"""Agent settings in words: every tenant setting has a label and a one-line explanation in English and
Spanish, the model comes first with only the inputs its provider needs, everything else sits under
"Advanced" in groups, nested settings are form rows, and save notices name what changed in words."""

from __future__ import annotations

import re
from inspect import isclass
from typing import get_args

from pydantic import BaseModel
from switchboard.console.form_words import ADVANCED_GROUPS, PROVIDERS, SETTING_WORDS, words_for
from switchboard.db.models import Role, Tenant
from switchboard.i18n import gettext
from switchboard.llm.config import DeploymentSettings, Provider
from switchboard.tenant_config.document import SECRET_SUFFIX, all_sections
from switchboard.tenant_config.form import form_sections

from tests.utils.console import log_in, new_user
from tests.utils.html_forms import form_values
from tests.utils.tenants import without_test_defaults

SAME_IN_SPANISH = {
    "Anthropic",
    "Azure OpenAI",
    "Gmail",
    "Google Gemini",
    "Instagram",
    "Ollama",
    "OpenAI",
    "WhatsApp",
}
"""Names that are the same in both languages."""


def _item_model(annotation: object) -> type[BaseModel] | None:
    for arg in (annotation, *get_args(annotation)):
        if isclass(arg) and issubclass(arg, BaseModel):
            return arg
        for inner in get_args(arg):
            if isclass(inner) and issubclass(inner, BaseModel):
                return inner
    return None


def _paths(prefix: str, model: type[BaseModel]) -> list[str]:
    """Every setting path of ``model`` as the words table keys it (deployments as ``deployment.*``)."""
    out = []
    for key, info in model.model_fields.items():
        public = key.removesuffix(SECRET_SUFFIX)
        path = f"{prefix}.{public}"
        out.append(path)
        nested = _item_model(info.annotation)
        if nested is DeploymentSettings:
            out += [f"deployment.{k.removesuffix(SECRET_SUFFIX)}" for k in DeploymentSettings.model_fields]
        elif nested is not None:
            out += _paths(path, nested)
    return out


def test_every_tenant_setting_has_a_label_and_an_explanation_in_english_and_spanish():
    paths = sorted({p for name, model in all_sections().items() for p in _paths(name, model)})
    assert len(paths) > 80
    missing = [p for p in paths if p not in SETTING_WORDS]
    assert missing == [], "give them words in switchboard/console/form_words.py"
    for path in paths:
        words = SETTING_WORDS[path]
        assert words.label and words.help.endswith("."), path
        assert "_" not in words.label and not re.search(r"\b(s|llm|chars)$", words.label), path
        for text in (words.label, words.help):
            assert gettext("es", text) != text or text in SAME_IN_SPANISH, f"no Spanish for {text!r}"
    assert set(SETTING_WORDS) <= set(paths), "words of a setting that no longer exists"


def test_every_provider_and_every_input_of_the_form_has_words():
    assert list(PROVIDERS) == list(get_args(Provider))
    for provider in PROVIDERS.values():
        assert gettext("es", provider.label) != provider.label or provider.label in SAME_IN_SPANISH
        assert provider.hint == "" or gettext("es", provider.hint) != provider.hint
    for _, title, _ in ADVANCED_GROUPS:
        assert gettext("es", title) != title
    names = []
    for section in form_sections({}, {}):
        stack = list(section.fields)
        while stack:
            field = stack.pop()
            names.append(field.name)
            stack += field.children + [cell for row in field.rows for cell in row]
    assert [n for n in names if words_for(n) is None] == []


async def _stored(sessions, tenant_id) -> dict:
    async with sessions() as session:
        return without_test_defaults((await session.get(Tenant, tenant_id)).settings_extensions)


async def test_the_model_comes_first_and_the_rest_is_grouped_under_advanced(
    console_client, sessions, make_tenant
):
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with console_client() as client:
        await log_in(client, admin)
        page = (await client.get(f"/t/{tenant.slug}/settings")).text
    model, advanced = page.index('id="section-model"'), page.index('<details id="advanced"')
    assert model < advanced
    groups = re.findall(r'<fieldset class="card" id="group-(\w+)">', page)
    assert groups == [
        "conversation",
        "replies",
        "handoff",
        "memory",
        "knowledge",
        "guardrails",
        "limits",
        "model",
        "data",
        "channels",
    ]
    assert (
        page.index('name="agent.name"') > advanced
        and page.index('name="llm.deployments.0.provider"') < advanced
    )
    for words in (
        "Tool rounds per answer",
        "Time kept for the backup model",
        "Share of the context window used",
        "Seconds of each answer's time limit kept so a backup model can still answer.",
    ):
        assert words in page
    for internal in ("per tool call cap", "fallback reserve s", "trim ratio", "(JSON)", "Llm"):
        assert internal not in page
    # the provider in words, and each input says which providers need it
    assert (
        '<option value="openai_compatible" >OpenAI-compatible server (vLLM, LM Studio, ...)</option>' in page
    )
    needs = re.search(r'<div data-needs="([^"]*)">\s*<label>Server address', page).group(1).split()
    assert sorted(needs) == ["azure", "offline", "ollama", "openai_compatible"]
    key_needs = re.search(r'<div data-needs="([^"]*)">\s*<label>API key', page).group(1).split()
    assert "ollama" not in key_needs and "openai" in key_needs
    # no model of its own yet: the first row is open to fill in
    assert '<div class="row card deployment" data-row="0">' in page and 'id="add-deployment"' not in page


async def test_guardrails_are_form_rows_and_a_save_notice_names_the_setting_in_words(
    console_client, sessions, make_tenant
):
    tenant = await make_tenant(guardrails={})  # the guardrails at their defaults: both on
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with console_client() as client:
        await log_in(client, admin)
        page = await client.get(f"/t/{tenant.slug}/settings")
        values = form_values(page.text, f"/t/{tenant.slug}/settings")
        assert values["guardrails.input.threshold"] == "0.5" and values["guardrails.output.enabled"] == "on"
        values["guardrails.input.threshold"] = "0.7"
        values.pop("guardrails.output.enabled")
        saved = await client.post(f"/t/{tenant.slug}/settings", data=values)
        assert saved.status_code == 200, saved.text[:3000]
        assert "Settings saved: Check of incoming messages, Check of answers." in saved.text
        assert "guardrails.input" not in saved.text.split('id="settings-history"')[0].split("</form>")[1]
    stored = await _stored(sessions, tenant.id)
    assert (
        stored["guardrails"]["input"]["threshold"] == 0.7
        and stored["guardrails"]["output"]["enabled"] is False
    )


async def test_a_ticked_model_row_is_removed_on_save(console_client, sessions, make_tenant):
    deployments = [
        {"id": "main", "provider": "offline", "model": "offline-demo"},
        {"id": "spare", "provider": "offline", "model": "offline-demo", "priority": 2},
    ]
    tenant = await make_tenant(llm={"deployments": deployments})
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with console_client(**{"Accept-Language": "es"}) as client:
        await log_in(client, admin)
        page = await client.get(f"/t/{tenant.slug}/settings")
        assert "Quitar este modelo" in page.text
        # one more is added behind "Añadir un modelo" (a disclosure: works without a script)
        assert re.search(
            r'<details class="add-row" id="add-deployment"><summary>Añadir un modelo</summary>\s*'
            r'<div class="row card deployment" data-row="2">',
            page.text,
        )
        values = form_values(page.text, f"/t/{tenant.slug}/settings")
        values["llm.deployments.1.remove"] = "on"
        saved = await client.post(f"/t/{tenant.slug}/settings", data=values)
        assert saved.status_code == 200, saved.text[:3000]
        assert "Ajustes guardados: Modelos." in saved.text
    assert [d["id"] for d in (await _stored(sessions, tenant.id))["llm"]["deployments"]] == ["main"]
