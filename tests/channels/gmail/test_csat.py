"""Customer satisfaction by e-mail: the AI ends a mail conversation, the customer gets one signed link
per answer, and the console's rating page stores the answer on its button (never on opening the
link, which mail scanners do), once; a link that is not ours, or another answer's, is refused."""

from __future__ import annotations

import re
from typing import Any

import httpx
from sqlmodel import select
from switchboard.db.models import Conversation, CsatAnswer

from services.console.main import create_app as create_console
from tests.utils.agent import answer_with_script, call, text, tool_calls
from tests.utils.gmail import connect_gmail, deliver, new_customer, run_sync, sent_from

CONSOLE = "https://console.shop.example"


async def _answers(sessions: Any, tenant_id: Any) -> list[CsatAnswer]:
    async with sessions() as session:
        return list((await session.exec(select(CsatAnswer).where(CsatAnswer.tenant_id == tenant_id))).all())


async def test_a_mail_conversation_gets_signed_links_and_the_rating_page_stores_one_answer(
    e2e_settings, make_tenant, sessions, model, offline_model
) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    script = await answer_with_script(sessions, tenant.id, offline_model, name=model[1])
    settings = e2e_settings(console_public_url=CONSOLE)
    mailbox = await connect_gmail(sessions, tenant, settings)
    script.push(tool_calls(call("end_conversation", {"farewell": True, "reason": "answered"})))
    script.push(text("The replacement ships today. Goodbye!"))
    await deliver(
        settings, mailbox.email, from_=new_customer(), subject="Broken lid", text="The lid is cracked."
    )
    await run_sync(settings, mailbox.account_id)

    async with sessions() as session:
        conversation = (
            await session.exec(select(Conversation).where(Conversation.tenant_id == tenant.id))
        ).one()
    farewell, question = await sent_from(settings, mailbox.email)
    assert farewell["text"] == "The replacement ships today. Goodbye!"
    lines = question["text"].splitlines()
    assert lines[0] == "How did we do? Please rate this conversation."
    links = dict(re.fullmatch(r"(\w+): (\S+)", line).groups() for line in lines[2:])  # type: ignore[union-attr]
    assert list(links) == ["Good", "OK", "Bad"]
    for rating, link in zip((5, 3, 1), links.values(), strict=True):
        assert link.startswith(f"{CONSOLE}/csat/{conversation.id}/{rating}?exp=")

    app = create_console(settings)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=CONSOLE) as browser,
    ):
        path = links["OK"].removeprefix(CONSOLE)
        opened = await browser.get(path)
        assert opened.status_code == 200 and 'data-state="asking"' in opened.text
        assert "<strong>OK</strong>" in opened.text
        assert [a.rating for a in await _answers(sessions, tenant.id)] == [None]  # opening stores nothing

        exp, sig = re.search(r"exp=(\d+)&sig=(\w+)", path).groups()  # type: ignore[union-attr]
        forged = await browser.post(f"/csat/{conversation.id}/5", data={"exp": exp, "sig": sig})
        assert forged.status_code == 403  # the OK link's signature does not rate 5
        tampered = await browser.get(path[:-4] + "0000")
        assert tampered.status_code == 403 and 'data-state="refused"' in tampered.text

        sent = await browser.post(f"/csat/{conversation.id}/3", data={"exp": exp, "sig": sig})
        assert sent.status_code == 200 and 'data-state="thanked"' in sent.text
        assert "Thank you for your rating!" in sent.text
        again = await browser.post(f"/csat/{conversation.id}/3", data={"exp": exp, "sig": sig})
        assert 'data-state="answered"' in again.text
        bad = links["Bad"].removeprefix(CONSOLE)
        assert 'data-state="answered"' in (await browser.get(bad)).text
    [answer] = await _answers(sessions, tenant.id)
    assert (answer.channel, answer.handled_by, answer.rating) == ("gmail", "ai", 3)
