"""Agent settings refuse a value with a sentence in the reader's language, never a regular expression
or library words; a time such as ``9:00`` is a time."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError
from switchboard.db.models import Role, Tenant
from switchboard.tenant_settings import OpeningPeriod

from tests.utils.console import log_in, new_user
from tests.utils.html_forms import form_values

INTERNALS = re.compile(r"\^|\$|\[0-9\]|\\d|pattern|Input should|String should|Value error|valid date")


def _lines(html: str) -> list[str]:
    """Each refused setting's line: where it is, ": ", why."""
    block = html.split('id="settings-problems"', 1)[1].split("</ul>", 1)[0]
    items = re.findall(r"<li>(.*?)</li>", block, flags=re.S)
    return [re.sub(r"<[^>]+>", "", item).strip() for item in items]


def _problems(html: str) -> list[str]:
    return [line.split(": ", 1)[1].strip() for line in _lines(html)]


async def _post(client, slug: str, changes: dict[str, str]):  # type: ignore[no-untyped-def]
    page = await client.get(f"/t/{slug}/settings")
    values = form_values(page.text, f"/t/{slug}/settings")
    values.update(changes)
    return await client.post(f"/t/{slug}/settings", data=values)


async def test_a_time_without_its_leading_zero_is_accepted(console_client, sessions, make_tenant):
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with console_client() as client:
        await log_in(client, admin)
        saved = await _post(
            client,
            tenant.slug,
            {"hours.enabled": "on", "hours.schedule.0.opens": "9:00", "hours.schedule.1.opens": " 09:30 "},
        )
        assert saved.status_code == 200, _problems(saved.text)
    async with sessions() as session:
        stored = (await session.get(Tenant, tenant.id)).settings_extensions["hours"]
    assert [p["opens"] for p in stored["schedule"][:2]] == ["09:00", "09:30"]


@pytest.mark.parametrize(
    ("language", "expected", "place"),
    [
        ("en", "Write a time as 09:00 (hours 00 to 23, minutes 00 to 59).", "Monday, opens"),
        ("es", "Escriba una hora como 09:00 (horas de 00 a 23, minutos de 00 a 59).", "Lunes, abre"),
    ],
)
async def test_every_refused_value_is_a_sentence_in_the_readers_language(
    console_client, sessions, make_tenant, language, expected, place
):
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with console_client() as client:
        await log_in(client, admin)
        await client.post("/language", data={"language": language, "next": "/"})
        refused = await _post(
            client,
            tenant.slug,
            {
                "hours.schedule.0.opens": "9am",
                "hours.schedule.1.closes": "25:00",
                "hours.holidays": "25/12/2026",
                "llm.deployments.0.id": "my model!",
                "llm.deployments.0.provider": "offline",
                "llm.deployments.0.model": "offline-demo",
                "save_anyway": "on",
            },
        )
    assert refused.status_code == 422
    problems = _problems(refused.text)
    assert len(problems) == 4, problems
    assert expected in problems
    lines = _lines(refused.text)
    assert f"{place}: {expected}" in lines  # the row named in words, not hours.schedule[0].opens
    assert not any(re.search(r"\[\d+\]|hours\.|llm\.|schedule", line.split(": ", 1)[0]) for line in lines), (
        lines
    )
    for text in problems:
        assert not INTERNALS.search(text), text
        assert text[0].isupper() and text.endswith("."), text
    if language == "es":
        assert all(" the " not in text for text in problems), problems


@given(hour=st.integers(0, 23), minute=st.integers(0, 59), padded=st.booleans())
def test_any_time_of_day_is_read_with_or_without_its_leading_zero(hour: int, minute: int, padded: bool):
    typed = f"{hour:02d}:{minute:02d}" if padded else f"{hour}:{minute:02d}"
    period = OpeningPeriod(day="mon", opens=typed, closes="24:00")
    assert period.opens == f"{hour:02d}:{minute:02d}"


@given(text=st.text(max_size=8))
def test_anything_else_is_refused_with_words(text: str):
    if re.fullmatch(r"([01]?[0-9]|2[0-3]):[0-5][0-9]", text.strip()):
        return
    with pytest.raises(ValidationError) as refused:
        OpeningPeriod(day="mon", opens=text, closes="24:00")
    assert [e["type"] for e in refused.value.errors()] == ["clock_time"]
