"""``switchboard channel add-whatsapp`` and the simulate helpers."""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid

import httpx
from sqlmodel import select
from switchboard.channels.accounts import access_token_of
from switchboard.channels.whatsapp.cli import (
    SIMULATED_WA_ID,
    phone_digits,
    retarget_payload,
    sent_line,
    with_sender,
)
from switchboard.cli.channel_common import SAMPLE_MEDIA
from switchboard.crypto import CredentialCipher
from switchboard.db.models import ChannelAccount, CsatAnswer, Customer, CustomerIdentity, Message
from switchboard.queue import Queue
from switchboard.queue.keys import inbound_job_id
from switchboard.standins.offline_server import ScriptedResponse

from services.whatsapp.main import create_app
from tests.utils.net import free_port
from tests.utils.servers import serve_app
from tests.utils.waiting import eventually
from tests.utils.whatsapp import APP_SECRET, load_payload, payload_path
from tests.utils.workers import run_worker_burst


async def test_add_whatsapp_token_is_encrypted_at_rest(cli, settings, sessions) -> None:  # type: ignore[no-untyped-def]
    slug = f"cli-{uuid.uuid4().hex[:8]}"
    pid = str(uuid.uuid4().int)[:15]
    assert (await cli.arun("tenant", "create", "--slug", slug, "--name", "CLI Shop")).exit_code == 0
    out = await cli.arun(
        "channel", "add-whatsapp", "--tenant", slug, "--phone-number-id", pid, "--access-token", "EAAG-secret"
    )
    assert out.exit_code == 0, out.output
    assert f"connected whatsapp number {pid}" in out.output and "/webhooks/whatsapp" in out.output
    bad = await cli.arun("channel", "add-whatsapp", "--tenant", slug, "--phone-number-id", "abc")
    assert bad.exit_code == 2
    empty = await cli.arun(
        "channel", "add-whatsapp", "--tenant", slug, "--phone-number-id", pid, "--access-token", ""
    )
    assert empty.exit_code == 2 and empty.stderr.startswith("error: --access-token is empty")
    other = str(uuid.uuid4().int)[:15]  # a number on the real Graph API with no token could never send
    tokenless = await cli.arun(
        "channel", "add-whatsapp", "--tenant", slug, "--phone-number-id", other, "--api-base", "real"
    )
    assert tokenless.exit_code == 2 and "needs its access token" in tokenless.stderr, tokenless.output
    again = await cli.arun(  # the number with a stored token may move to the real API without a new one
        "channel", "add-whatsapp", "--tenant", slug, "--phone-number-id", pid, "--api-base", "real"
    )
    assert again.exit_code == 0, again.output
    async with sessions() as session:
        account = (
            await session.exec(select(ChannelAccount).where(ChannelAccount.external_account_id == pid))
        ).one()
    assert "EAAG-secret" not in account.credentials_encrypted
    assert (
        access_token_of(account, CredentialCipher(settings.secret("encryption_key").encode()))
        == "EAAG-secret"
    )


def test_retarget_payload_sets_account_and_refreshes_timestamps() -> None:
    body = load_payload("batch_multiple_messages_and_status.json", refresh=False)
    moved = retarget_payload(body, phone_number_id="123")
    values = [c["value"] for e in moved["entry"] for c in e["changes"]]
    assert {v["metadata"]["phone_number_id"] for v in values} == {"123"}
    stamps = [int(m["timestamp"]) for v in values for m in v.get("messages", []) + v.get("statuses", [])]
    assert max(stamps) - min(stamps) == 1781000782 - 1781000779 and min(stamps) > 1781000782
    kept = retarget_payload(body, phone_number_id="123", keep_timestamps=True)
    assert kept["entry"][1]["changes"][0]["value"]["statuses"][0]["timestamp"] == "1781000782"


async def test_simulate_payload_twice_gets_fresh_ids_and_unanswerable_posts_return_at_once(
    make_settings, wa_tenant, sessions, graph_sandbox, cli, arq_pool, stops_at_the_queue
) -> None:  # type: ignore[no-untyped-def]
    port = free_port()
    settings = make_settings(whatsapp_port=port)
    env = {
        "META_APP_SECRET": APP_SECRET,
        "WHATSAPP_PORT": str(port),
        "WHATSAPP_GRAPH_BASE_URL": graph_sandbox[0],
    }
    slug = wa_tenant.tenant.slug

    async def simulate(name: str, *extra: str, wait: str = "20"):  # type: ignore[no-untyped-def]
        args = ["simulate", "whatsapp", "--tenant", slug, "--payload", str(payload_path(name)), *extra]
        started = time.monotonic()
        out = await cli.arun(*args, "--timeout", wait, **env)
        return out, time.monotonic() - started

    async with serve_app(create_app(settings), port=port):
        fresh = [await simulate("text.json", wait="0.3") for _ in range(2)]  # no worker: no reply
        for out, _ in fresh:
            assert out.exit_code == 0, out.output
            assert '"stored":1,"duplicates":0' in out.stderr
            # nothing in the outbox to explain it: the general causes
            assert "no reply within 0.3 s. The message is stored; the worker may have handed" in out.stderr
            # a command that runs as written (`agents list` alone needs --tenant)
            assert f"MODE human or waiting in `switchboard conversations list --tenant {slug}`" in out.stderr
        again, _ = await simulate("text.json", "--keep-ids", wait="0.3")
        again_too, seconds = await simulate("text.json", "--keep-ids")
        status, status_seconds = await simulate("status_read.json")

    assert again.exit_code == 0 and '"stored":1' in again.stderr  # the original id: new to this tenant
    # "return at once": well inside the 20 s the command would otherwise wait for a reply
    assert again_too.exit_code == 0 and '"stored":0,"duplicates":1' in again_too.stderr and seconds < 10
    assert (
        "nothing new stored (1 duplicate(s): already received): no reply will come "
        "(drop --keep-ids to post fresh message ids)" in again_too.stderr
    )
    assert status.exit_code == 0 and status_seconds < 10
    assert "holds no customer message to answer" in status.stderr
    async with sessions() as session:
        rows = (
            await session.exec(
                select(Message.id, Message.external_id).where(Message.tenant_id == wa_tenant.tenant.id)
            )
        ).all()
    original = load_payload("text.json", refresh=False)["entry"][0]["changes"][0]["value"]["messages"][0][
        "id"
    ]
    ids = [external_id for _, external_id in rows]
    assert len(ids) == 3 and len(set(ids)) == 3 and original in ids
    assert all(i.startswith(original) for i in ids)
    # no worker ran: each stored message's job is waiting, and the status's (discarded at the end)
    queued = {job_id.decode() for job_id in await arq_pool.zrange(Queue.chat.value, 0, -1)}
    (status_job,) = queued - {inbound_job_id(row_id) for row_id, _ in rows}
    assert len(queued) == 4 and status_job.startswith("statuses:whatsapp:")


def test_with_sender_replaces_every_customer_messages_sender_and_keeps_the_rest() -> None:
    body = load_payload("batch_multiple_messages_and_status.json", refresh=False)
    moved = with_sender(body, "15550107777")
    values = [c["value"] for e in moved["entry"] for c in e["changes"]]
    assert {m["from"] for v in values for m in v.get("messages", [])} == {"15550107777"}
    assert {c["wa_id"] for v in values for c in v.get("contacts", [])} <= {"15550107777"}
    original = [c["value"] for e in body["entry"] for c in e["changes"]]
    assert [v.get("statuses") for v in values] == [v.get("statuses") for v in original]
    assert phone_digits("--from", "+1 555-010-7777") == "15550107777"


async def test_simulate_payload_with_from_is_that_customers_message(
    make_settings, wa_tenant, sessions, graph_sandbox, cli, stops_at_the_queue
) -> None:  # type: ignore[no-untyped-def]
    port = free_port()
    settings = make_settings(whatsapp_port=port)
    env = {
        "META_APP_SECRET": APP_SECRET,
        "WHATSAPP_PORT": str(port),
        "WHATSAPP_GRAPH_BASE_URL": graph_sandbox[0],
    }
    args = ["simulate", "whatsapp", "--tenant", wa_tenant.tenant.slug, "--payload"]
    async with serve_app(create_app(settings), port=port):
        out = await cli.arun(
            *args, str(payload_path("text.json")), "--from", "+15550107777", "--timeout", "0.3", **env
        )
    assert out.exit_code == 0, out.output
    assert '"stored":1,"duplicates":0' in out.stderr
    async with sessions() as session:
        senders = (
            await session.exec(
                select(Message.sender_external_id).where(Message.tenant_id == wa_tenant.tenant.id)
            )
        ).all()
    assert list(senders) == ["15550107777"]


def test_with_sender_gives_each_number_its_own_user_ids() -> None:
    body = load_payload("image_with_caption.json", refresh=False)
    (contact,) = body["entry"][0]["changes"][0]["value"]["contacts"]
    first, second, again = (with_sender(body, n) for n in ("15550107777", "15550108888", "15550107777"))

    def ids(moved):  # type: ignore[no-untyped-def]
        (c,) = moved["entry"][0]["changes"][0]["value"]["contacts"]
        return c["user_id"], c["parent_user_id"]

    assert ids(first) == ids(again)  # one number: the same customer in every post
    assert ids(first) != ids(second)
    assert not {contact["user_id"], contact["parent_user_id"]} & {*ids(first), *ids(second)}
    assert ids(first)[0].startswith("US.") and ids(first)[1].startswith("US.ENT.")
    withheld = with_sender(
        load_payload("text_from_username_user_phone_withheld.json", refresh=False), "15550107777"
    )
    (message,) = withheld["entry"][0]["changes"][0]["value"]["messages"]
    (named,) = withheld["entry"][0]["changes"][0]["value"]["contacts"]
    assert (
        message["from"] == "15550107777"
        and message["from_user_id"] == named["user_id"] != "US.10000000000000000001"
    )


async def test_simulate_one_payload_as_two_numbers_is_two_customers(
    e2e_settings, ai_tenant, model, graph_sandbox, cli, arq_pool, sessions
) -> None:  # type: ignore[no-untyped-def]
    """The image payload carries a business-scoped user id: posted with two --from numbers it is two
    customers, and the first keeps its number."""
    state, name, _ = model
    state.script(name).default = ScriptedResponse(content="Nice picture.")
    port = free_port()
    settings = e2e_settings(whatsapp_port=port)
    env = {
        "META_APP_SECRET": APP_SECRET,
        "WHATSAPP_PORT": str(port),
        "WHATSAPP_GRAPH_BASE_URL": graph_sandbox[0],
    }
    image = str(payload_path("image_with_caption.json"))
    async with serve_app(create_app(settings), port=port):
        for number in ("+15550107777", "+15550108888"):
            simulated = asyncio.create_task(
                cli.arun(
                    "simulate",
                    "whatsapp",
                    "-t",
                    ai_tenant.tenant.slug,
                    "--payload",
                    image,
                    "--from",
                    number,
                    "--timeout",
                    "2",
                    **env,
                )
            )
            await eventually(lambda: arq_pool.zcard(Queue.chat.value), what="the inbound job queued")
            await run_worker_burst(settings)
            out = await simulated
            assert out.exit_code == 0, out.output
    async with sessions() as session:
        customers = (
            await session.exec(select(Customer).where(Customer.tenant_id == ai_tenant.tenant.id))
        ).all()
        phones = {
            c.id: sorted(
                (i.kind, i.value)
                for i in (
                    await session.exec(
                        select(CustomerIdentity).where(
                            CustomerIdentity.customer_id == c.id,
                            CustomerIdentity.retired_at.is_(None),  # type: ignore[union-attr]
                        )
                    )
                ).all()
                if i.kind == "wa_id"
            )
            for c in customers
        }
    assert sorted(c.phone or "" for c in customers) == ["15550107777", "15550108888"]
    assert sorted(phones.values()) == [[("wa_id", "15550107777")], [("wa_id", "15550108888")]]


async def test_simulate_and_add_whatsapp_find_the_running_system_through_run_json(
    make_settings, wa_tenant, tmp_path, cli, sessions, stops_at_the_queue
) -> None:  # type: ignore[no-untyped-def]
    """Another terminal without WHATSAPP_PORT still reaches the services `switchboard run` started
    (and `--text` without `--from` is the simulated customer's)."""
    port = free_port()
    settings = make_settings(whatsapp_port=port)
    data_dir = tmp_path / "run-data"
    data_dir.mkdir()
    # what `switchboard run` records: its (live) pid and the ports it started services on
    (data_dir / "run.json").write_text(
        json.dumps({"pid": os.getpid(), "network": {"host": "127.0.0.1", "whatsapp_port": port}})
    )
    env = {"DATA_DIR": str(data_dir), "META_APP_SECRET": APP_SECRET}
    slug = wa_tenant.tenant.slug
    async with serve_app(create_app(settings), port=port):
        posted = await cli.arun(
            "simulate", "whatsapp", "--tenant", slug, "--text", "hi", "--timeout", "0.3", **env
        )
    assert posted.exit_code == 0, posted.output
    assert '"stored":1' in posted.stderr
    async with sessions() as session:
        senders = (
            await session.exec(
                select(Message.sender_external_id).where(Message.tenant_id == wa_tenant.tenant.id)
            )
        ).all()
    assert senders == [SIMULATED_WA_ID.lstrip("+")]
    pid = str(uuid.uuid4().int)[:15]
    added = await cli.arun("channel", "add-whatsapp", "--tenant", slug, "--phone-number-id", pid, **env)
    assert added.exit_code == 0, added.output
    assert f"locally http://127.0.0.1:{port}/webhooks/whatsapp" in added.stdout


async def test_simulate_payload_puts_sample_media_in_the_sandbox_for_its_images(
    make_settings, wa_tenant, graph_sandbox, cli, stops_at_the_queue
) -> None:  # type: ignore[no-untyped-def]
    port = free_port()
    settings = make_settings(whatsapp_port=port)
    env = {
        "META_APP_SECRET": APP_SECRET,
        "WHATSAPP_PORT": str(port),
        "WHATSAPP_GRAPH_BASE_URL": graph_sandbox[0],
    }
    async with serve_app(create_app(settings), port=port):
        out = await cli.arun(
            "simulate",
            "whatsapp",
            "--tenant",
            wa_tenant.tenant.slug,
            "--payload",
            str(payload_path("image_with_caption.json")),
            "--timeout",
            "0.3",
            **env,
        )
    assert out.exit_code == 0, out.output
    # the payload's media id now resolves in the sandbox: the demo's vision sees a picture
    assert graph_sandbox[1].media["1000000000000021"] == (SAMPLE_MEDIA["image"], "image/jpeg")


async def test_simulate_names_the_failed_send_when_no_reply_came(
    e2e_settings, ai_tenant, model, graph_sandbox, cli, arq_pool
) -> None:  # type: ignore[no-untyped-def]
    """The worker answers, the Graph API refuses the send for good (131026, the sandbox's fault hook): the
    command names that failure instead of the general "human mode, or still working" causes."""
    state, name, _ = model
    state.script(name).default = ScriptedResponse(content="This will not arrive.")
    port = free_port()
    settings = e2e_settings(whatsapp_port=port)
    pid = ai_tenant.phone_number_id
    async with httpx.AsyncClient() as http:
        scripted = await http.post(
            f"{graph_sandbox[0]}/_control/failures", json={"phone_number_id": pid, "code": 131026}
        )
        assert scripted.status_code == 200, scripted.text
    env = {
        "META_APP_SECRET": APP_SECRET,
        "WHATSAPP_PORT": str(port),
        "WHATSAPP_GRAPH_BASE_URL": graph_sandbox[0],
    }
    async with serve_app(create_app(settings), port=port):
        started = time.monotonic()
        simulated = asyncio.create_task(
            cli.arun(
                "simulate", "whatsapp", "-t", ai_tenant.tenant.slug, "--text", "hi", "--timeout", "60", **env
            )
        )
        # the webhook stored the message and queued its job: now the worker answers it
        await eventually(lambda: arq_pool.zcard(Queue.chat.value), what="the inbound job queued")
        await run_worker_burst(settings)
        out = await simulated
        waited_s = time.monotonic() - started
    assert out.exit_code == 0, out.output
    assert waited_s < 30, waited_s  # it stopped waiting once the send had failed, not after --timeout
    assert "a reply to 15550100099 was written but its send failed: 131026" in out.stderr
    assert "retry it from the console's Platform page" in out.stderr
    assert "--role platform_admin" in out.stderr  # who may open it
    assert "no reply within" not in out.stderr


async def test_simulate_says_the_conversation_waits_for_a_person(
    e2e_settings, ai_tenant, model, graph_sandbox, cli, arq_pool
) -> None:  # type: ignore[no-untyped-def]
    """The customer asked for a person, nobody is online: the next message gets no AI reply, and the
    command says the conversation is waiting in the queue (not "human mode, or still working")."""
    state, name, _ = model
    state.script(name).push(
        ScriptedResponse(
            kind="tool_calls", tool_calls=[{"name": "escalate_to_human", "arguments": {"reason": "asked"}}]
        ),
        ScriptedResponse(content="Everyone is busy; someone will answer soon."),
    )
    port = free_port()
    settings = e2e_settings(whatsapp_port=port)
    env = {
        "META_APP_SECRET": APP_SECRET,
        "WHATSAPP_PORT": str(port),
        "WHATSAPP_GRAPH_BASE_URL": graph_sandbox[0],
    }
    slug, outs = ai_tenant.tenant.slug, []
    async with serve_app(create_app(settings), port=port):
        for text in ("a person please", "hello? anyone?"):
            simulated = asyncio.create_task(
                cli.arun(
                    "simulate",
                    "whatsapp",
                    "--tenant",
                    slug,
                    "--text",
                    text,
                    "--from",
                    "+15550107777",
                    "--timeout",
                    "4",
                    **env,
                )
            )
            await eventually(lambda: arq_pool.zcard(Queue.chat.value), what="the inbound job queued")
            await run_worker_burst(settings)
            outs.append(await simulated)
    first, second = outs
    assert "Everyone is busy; someone will answer soon." in first.stdout, first.output
    assert second.exit_code == 0 and second.stdout == "", second.output
    assert "is waiting in the queue for a person (nobody from the team took it yet)" in second.stderr
    assert f"switchboard conversations show --tenant {slug} " in second.stderr
    assert "no reply within" not in second.stderr


def test_sent_line_prints_the_buttons_a_message_offers() -> None:
    record = {
        "seq": 3,
        "id": "wamid.Q",
        "phone_number_id": "106",
        "to": "15550107777",
        "type": "interactive",
        "text": None,
        "reply_to": None,
        "interactive": {
            "type": "button",
            "body": {"text": "How did we do?"},
            "action": {"buttons": [{"type": "reply", "reply": {"id": "csat:c:5", "title": "Good"}}]},
        },
    }
    assert sent_line(record) == {
        "to": "15550107777",
        "type": "interactive",
        "text": "How did we do?",
        "id": "wamid.Q",
        "phone_number_id": "106",
        "reply_to": None,
        "buttons": [{"id": "csat:c:5", "title": "Good"}],
    }
    assert "buttons" not in sent_line({**record, "type": "text", "text": "hi", "interactive": None})


async def test_simulate_prints_the_rating_question_and_button_taps_it(
    e2e_settings, ai_tenant, model, graph_sandbox, cli, arq_pool, sessions
) -> None:  # type: ignore[no-untyped-def]
    """The AI ends the conversation: the command prints the goodbye and the rating question with its
    buttons; `--button ID` taps one, which is stored as the rating and thanked; a button never offered
    is refused naming the ones that were; the question is kept in the conversation's history."""
    state, name, _ = model
    state.script(name).push(
        ScriptedResponse(
            kind="tool_calls", tool_calls=[{"name": "end_conversation", "arguments": {"farewell": True}}]
        ),
        ScriptedResponse(content="Glad to help, goodbye!"),
    )
    port = free_port()
    settings = e2e_settings(whatsapp_port=port)
    env = {
        "META_APP_SECRET": APP_SECRET,
        "WHATSAPP_PORT": str(port),
        "WHATSAPP_GRAPH_BASE_URL": graph_sandbox[0],
    }
    common = ("simulate", "whatsapp", "-t", ai_tenant.tenant.slug, "--from", "+15550107777", "--timeout", "8")

    async def simulate(*args: str):  # type: ignore[no-untyped-def]
        simulated = asyncio.create_task(cli.arun(*common, *args, **env))
        await eventually(lambda: arq_pool.zcard(Queue.chat.value), what="the inbound job queued")
        await run_worker_burst(settings)
        return await simulated

    async with serve_app(create_app(settings), port=port):
        bye = await simulate("--text", "that's all, thanks")
        assert bye.exit_code == 0, bye.output
        lines = [json.loads(line) for line in bye.stdout.splitlines()]
        assert [line["text"] for line in lines] == [
            "Glad to help, goodbye!",
            "How did we do? Please rate this conversation.",
        ]
        buttons = lines[1]["buttons"]
        assert [b["title"] for b in buttons] == ["Good", "OK", "Bad"]
        good = buttons[0]["id"]
        assert good.startswith("csat:") and good.endswith(":5")
        unknown = await cli.arun(*common, "--button", "csat:nope:5", **env)
        tapped = await simulate("--button", good)
    assert unknown.exit_code == 2
    assert unknown.stderr.strip() == (
        "error: --button csat:nope:5: no message sent to +15550107777 offers it; the last buttons it was "
        f"sent: {good} (Good), {buttons[1]['id']} (OK), {buttons[2]['id']} (Bad)"
    )
    assert tapped.exit_code == 0, tapped.output
    assert [json.loads(line)["text"] for line in tapped.stdout.splitlines()] == [
        "Thank you for your rating!",
        "Anything you'd like to add? Just write it here, or skip this.",
    ]
    conversation_id = uuid.UUID(good.split(":")[1])
    async with sessions() as session:
        answer = (
            await session.exec(select(CsatAnswer).where(CsatAnswer.conversation_id == conversation_id))
        ).one()
        kept = (
            await session.exec(
                select(Message.role, Message.kind, Message.text).where(
                    Message.conversation_id == conversation_id, Message.kind == "system"
                )
            )
        ).all()
    assert answer.rating == 5
    assert list(kept) == [
        ("system", "system", "How did we do? Please rate this conversation.\nGood · OK · Bad")
    ]
