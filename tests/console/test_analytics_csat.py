"""Customer satisfaction in analytics: seeded answers with known figures, per handler (the AI, a
WhatsApp agent, a console user), through the admin API and the console page in English and Spanish."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import update
from switchboard.db.models import CsatAnswer, Role, Tenant, utcnow

from tests.utils.agent import make_conversation
from tests.utils.console import log_in, new_user
from tests.utils.handoff import make_agent


async def _answer(sessions, tenant, *, rating, handled_by="ai", agent_id=None, user_id=None, days_ago=1):  # type: ignore[no-untyped-def]
    conversation = (await make_conversation(sessions, tenant)).conversation
    at = utcnow() - timedelta(days=days_ago)
    async with sessions() as session, session.begin():
        session.add(
            CsatAnswer(
                tenant_id=tenant.id,
                conversation_id=conversation.id,
                channel="whatsapp",
                handled_by=handled_by,
                agent_id=agent_id,
                user_id=user_id,
                rating=rating,
                asked_at=at,
                answered_at=at if rating is not None else None,
            )
        )


async def test_csat_per_handler_and_in_all_against_seeded_answers(console_client, sessions, make_tenant):  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    rita = await make_agent(sessions, tenant, "Rita")
    pat = await new_user(sessions, role=Role.agent, tenant_id=tenant.id, name="Pat")
    for rating in (5, 5, 3, 1):  # the AI: average 3.5, 2 of 4 good
        await _answer(sessions, tenant, rating=rating)
    await _answer(sessions, tenant, rating=4, handled_by="agent", agent_id=rita.id)
    await _answer(sessions, tenant, rating=2, handled_by="agent", agent_id=rita.id)  # Rita: 3.0, 50%
    await _answer(sessions, tenant, rating=5, handled_by="console_user", user_id=pat.id)  # Pat: 5.0, 100%
    await _answer(sessions, tenant, rating=None)  # asked, never answered: not counted
    await _answer(sessions, tenant, rating=1, days_ago=20)  # before the range: not counted

    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with console_client() as client:
        await log_in(client, admin)
        data = (await client.get(f"/v1/admin/tenants/{tenant.slug}/analytics?days=14")).json()
        page = await client.get(f"/t/{tenant.slug}/analytics?days=14")
        async with sessions() as session, session.begin():
            await session.exec(
                update(Tenant)
                .where(Tenant.id == tenant.id)
                .values(settings_extensions={"locale": {"language": "es"}})
            )
        spanish = await client.get(f"/t/{tenant.slug}/analytics?days=14", headers={"Accept-Language": "es"})

    assert [
        (c["handled_by"], c["name"], c["count"], c["average"], c["good_share"]) for c in data["csat"]
    ] == [
        ("ai", "", 4, 3.5, 0.5),
        ("console_user", "Pat", 1, 5.0, 1.0),
        ("agent", "Rita", 2, 3.0, 0.5),
    ]
    assert (data["totals"]["csat_count"], data["totals"]["csat_average"]) == (7, 3.57)  # 25 / 7
    assert data["totals"]["csat_good_share"] == round(4 / 7, 4)

    assert page.status_code == 200
    table = page.text.split('<table id="csat">', 1)[1].split("</table>", 1)[0]
    assert '<tr data-handled-by="ai"><td>The AI</td><td>4</td><td>3.50</td><td>50%</td></tr>' in table
    assert "<td>Rita</td><td>2</td><td>3.00</td><td>50%</td>" in table
    assert "<td>Pat</td><td>1</td><td>5.00</td><td>100%</td>" in table
    assert '<td id="csat-average">3.57</td>' in table and '<td id="csat-good">57%</td>' in table
    assert "Satisfacción del cliente" in spanish.text and "<td>La IA</td>" in spanish.text


async def test_no_answers_says_so(console_client, sessions, make_tenant):  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with console_client() as client:
        await log_in(client, admin)
        page = await client.get(f"/t/{tenant.slug}/analytics?days=7")
    assert 'id="csat-none"' in page.text and '<table id="csat">' not in page.text


async def test_the_csat_section_of_agent_settings_in_spanish(console_client, sessions, make_tenant):  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    async with sessions() as session, session.begin():
        await session.exec(
            update(Tenant)
            .where(Tenant.id == tenant.id)
            .values(settings_extensions={"locale": {"language": "es"}})
        )
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with console_client() as client:
        await log_in(client, admin)
        page = await client.get(f"/t/{tenant.slug}/settings")
    # the csat settings are among the handoff settings under Advanced
    section = page.text.split('id="group-handoff"', 1)[1].split("</fieldset>\n    {% endfor %}", 1)[0]
    assert "Pedir una valoración" in section and "Agradecimiento por la valoración" in section
    assert "¿Cómo lo hemos hecho? Por favor, valore esta conversación." in section  # the tenant's language
