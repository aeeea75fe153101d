"""Personal data stays out of the logs: every line of a whole WhatsApp turn and a whole Gmail turn
(webhook or sync, worker, orchestrator, reply), at DEBUG, holds no phone number, e-mail address or
message text of the customer; ``LOG_UNMASK_PII`` shows them again and says so."""

from __future__ import annotations

import json

import pytest
from switchboard.observability import configure_logging, get_logger
from switchboard.observability.pii import mask_text
from switchboard.standins.offline_server import ScriptedResponse

from tests.utils.agent import answer_with_script
from tests.utils.gmail import connect_gmail, deliver, new_customer, run_sync, sent_from
from tests.utils.whatsapp import channel_service, load_payload, sent_to, text_body
from tests.utils.workers import run_worker_burst

PHONE = "34611223344"


def _lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("{")]


async def test_a_whole_whatsapp_and_gmail_turn_logs_no_phone_email_or_text(
    e2e_settings,
    ai_tenant,
    model,
    sessions,
    graph_sandbox,
    make_tenant,
    offline_model,
    capsys,  # noqa: F811
) -> None:  # type: ignore[no-untyped-def]
    state, name, _ = model
    state.script(name).default = ScriptedResponse(content=f"Noted, we call you at +{PHONE} or write to you.")
    settings = e2e_settings(log_format="json", log_level="DEBUG")
    pid = ai_tenant.phone_number_id
    said = "my parcel 7Q never came, call me on +34 611 223 344"
    capsys.readouterr()
    async with channel_service(settings) as svc:
        await svc.post(
            text_body(phone_number_id=pid, wamid="wamid.PII1", text=said, wa_id=PHONE, name="Lola Flores")
        )
    await run_worker_burst(settings)
    assert [m["to"] for m in sent_to(graph_sandbox[1], pid)] == [PHONE]
    async with channel_service(settings) as svc:  # the reply's delivery statuses, one of them a failure
        for status in ("status_delivered.json", "status_failed_131047_reengagement.json"):
            body = json.dumps(load_payload(status, phone_number_id=pid)).replace("15550100099", PHONE)
            assert (await svc.post(json.loads(body))).status_code == 200
    await run_worker_burst(settings)

    tenant = await make_tenant()
    await answer_with_script(sessions, tenant.id, offline_model, name=name)
    connected = await connect_gmail(sessions, tenant, settings)
    email = new_customer()
    await deliver(
        settings,
        connected.email,
        from_=email,
        from_name="Lola Flores",
        subject="Parcel",
        text=f"Where is it? Write to {email}, phone +{PHONE}",
    )
    await run_sync(settings, connected.account_id)
    assert [s["to"] for s in await sent_from(settings, connected.email)] == [email]

    lines = _lines(capsys.readouterr().err)
    assert len(lines) > 30  # the whole path logged (DEBUG)
    for needle in (PHONE, "611 223 344", email, said, "Where is it?"):
        assert [line for line in lines if needle in line] == [], needle


def test_masking_keeps_what_is_not_personal_and_the_operator_can_turn_it_off(capsys) -> None:
    assert mask_text("call +34 611 223 344 or ana.r@example.org") == "call ***44 or a***@example.org"
    kept = "2026-12-07T18:00:00Z order 1042 trace 5f1c2a9e0b7d4e3f8a6b1c2d3e4f5a6b id 0b7d4e3f-8a6b-4c2d-9e4f-5a6b1c2d3e4f"
    assert mask_text(kept) == kept
    configure_logging(service="test", level="INFO", fmt="json", unmask_pii=True)
    try:
        get_logger("t").info("hello", wa_id=PHONE)
        lines = [json.loads(line) for line in _lines(capsys.readouterr().err)]
        assert [(line["event"], line["level"]) for line in lines][0] == ("pii_unmasked", "warning")
        assert lines[-1]["wa_id"] == PHONE
    finally:
        configure_logging(service="test", level="INFO", fmt="json")
    get_logger("t").info("hello", wa_id=PHONE, text="secret words")
    (line,) = [json.loads(line) for line in _lines(capsys.readouterr().err)]
    assert (line["wa_id"], line["text"]) == ("***44", "[12 chars]")


@pytest.fixture(autouse=True)
def _restore_logging():  # type: ignore[no-untyped-def]
    yield
    configure_logging(service="test", level="INFO", fmt="auto")
