"""Text the database cannot store (a NUL, an unpaired surrogate) in any tenant setting is refused at
save with a 422 naming the setting: the shared setting text type, through the admin API."""

from __future__ import annotations

import json

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError
from switchboard.db.models import Tenant
from switchboard.tenant_settings import AgentSettings, SettingText

from services.orchestrator.main import create_app
from tests.utils.tenants import without_test_defaults


@pytest.fixture
async def api(settings):
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        headers = {"Authorization": f"Bearer {settings.secret('admin_token')}"}
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=headers) as client:
            yield client


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        ('{"agent": {"name": "a\\u0000b"}}', "agent.name"),
        ('{"agent": {"handoff_reply": "one moment\\u0000"}}', "agent.handoff_reply"),
        ('{"agent": {"system_prompt": "x\\ud800y"}}', "agent.system_prompt"),
        ('{"guardrails": {"input": {"redirect_reply": "\\u0000"}}}', "guardrails.input.redirect_reply"),
        ('{"budget": {"holding_reply": "later\\udfff"}}', "budget.holding_reply"),
    ],
)
async def test_an_unstorable_character_in_a_setting_is_a_422_naming_it(api, make_tenant, sessions, raw, path):
    tenant = await make_tenant()
    response = await api.patch(
        f"/v1/admin/tenants/{tenant.slug}/settings",
        content=raw.encode(),
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 422, response.text
    [problem] = response.json()["detail"]
    assert problem["path"] == path
    assert "cannot be stored" in problem["message"] or "unicode" in problem["message"]
    async with sessions() as session:
        stored = without_test_defaults((await session.get(Tenant, tenant.id)).settings_extensions)
    assert json.dumps(stored).find("\\u0000") == -1


class _Text(BaseModel):
    value: SettingText


@given(
    st.text(max_size=20),
    st.sampled_from(["\x00", "\ud800", "\udbff", "\udc00", "\udfff"]),
    st.text(max_size=20),
)
def test_setting_text_refuses_exactly_what_postgres_cannot_store(before, bad, after):
    with pytest.raises(ValidationError) as refused:
        _Text(value=before + bad + after)
    assert refused.value.errors()[0]["type"] == "unstorable_text"


@given(st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=40))
def test_setting_text_keeps_any_other_text(text):
    assert _Text(value=text).value == text
    assert AgentSettings(name=text or "A").name == (text or "A")


def _text_fields(model: type[BaseModel], path: str) -> list[tuple[str, object]]:
    """``(path, field)`` of every field of ``model`` and its nested models that holds free text."""
    import typing

    out: list[tuple[str, object]] = []
    for name, field in model.model_fields.items():
        kinds = typing.get_args(field.annotation) or (field.annotation,)
        for kind in kinds:
            inner = typing.get_args(kind) or (kind,)
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                out += _text_fields(kind, f"{path}.{name}")
            elif str in (kind, *inner) and typing.get_origin(kind) is not dict:
                out.append((f"{path}.{name}", field))
    return out


_NOT_FREE_TEXT = {"api_base", "api_key_encrypted"}
"""Checked elsewhere: a URL by the outbound-address policy when saved; a key's ciphertext is written by the
platform, never typed."""


def test_every_free_text_setting_of_every_section_uses_the_shared_setting_text():
    from switchboard.tenant_settings import CORE_SECTIONS, channel_sections

    plain = []
    for section, model in {**CORE_SECTIONS, **channel_sections()}.items():
        for path, field in _text_fields(model, section):
            literal = "Literal" in str(field.annotation)  # type: ignore[attr-defined]
            text = repr(field.annotation) + repr(field.metadata)  # type: ignore[attr-defined]
            # the shared type, or a stricter one: a pattern, or the model-name characters
            shared = any(mark in text for mark in ("_storable_setting", "pattern=", "_check_model_name"))
            if not literal and not shared and path.rsplit(".", 1)[-1] not in _NOT_FREE_TEXT:
                plain.append(path)
    assert plain == []
