"""Whole-system fault tests through the running services and their hooks
(docs/contributing.md#fault-hooks).

The model provider is the offline model server *service* with its control hook on
(``MODEL_SERVER_CONTROL``, scripted over HTTP with the admin token); Meta is the Graph sandbox,
scripted over HTTP. The orchestrator is the session's real service; the worker runs in burst mode.
"""

from __future__ import annotations

import httpx
import pytest
from sqlmodel import select
from switchboard.channels.whatsapp.cli import post_signed
from switchboard.db.models import Outbox, Tenant, Turn
from switchboard.standins.offline_server import ScriptedResponse

from services.model_server.main import create_app as model_server_app
from services.whatsapp.main import create_app as whatsapp_app
from tests.utils.agent import deployment, llm_settings, unique_model
from tests.utils.net import free_port
from tests.utils.servers import serve_app
from tests.utils.whatsapp import APP_SECRET, channel_service, encode, sent_to, text_body
from tests.utils.workers import run_worker_burst


async def _use_deployments(sessions, tenant_id, *deployments, **policy) -> None:  # type: ignore[no-untyped-def]
    async with sessions() as session, session.begin():
        tenant = await session.get(Tenant, tenant_id)
        tenant.settings_extensions = {
            **tenant.settings_extensions,
            "llm": llm_settings(*deployments, **policy),
        }
        session.add(tenant)


@pytest.mark.parametrize(
    "failure",
    [
        {"kind": "error", "status": 429, "headers": {"Retry-After": "47"}},
        {"kind": "empty", "content": " \n "},
    ],
    ids=["429-retry-after-47", "empty-answer"],
)
async def test_a_failing_primary_is_answered_by_the_backup_through_the_running_services(
    e2e_settings, wa_tenant, sessions, graph_sandbox, failure
) -> None:  # type: ignore[no-untyped-def]
    settings = e2e_settings(model_server_control=True)
    token = {"Authorization": f"Bearer {settings.secret('admin_token')}"}
    primary, backup = unique_model("primary"), unique_model("backup")
    async with (
        serve_app(model_server_app(settings)) as url,
        httpx.AsyncClient(base_url=url, headers=token) as ctl,
    ):
        await ctl.post(f"/control/{primary}", json={"responses": [failure]})
        await ctl.post(
            f"/control/{backup}", json={"responses": [{"kind": "text", "content": "The backup answers."}]}
        )
        await _use_deployments(
            sessions,
            wa_tenant.tenant.id,
            deployment(url, primary, priority=1),
            deployment(url, backup, priority=2),
            num_retries=2,
        )
        async with channel_service(settings) as svc:
            await svc.post(
                text_body(phone_number_id=wa_tenant.phone_number_id, wamid=f"wamid.F{primary}", text="hi")
            )
        await run_worker_burst(settings)
        primary_seen = (await ctl.get(f"/control/{primary}")).json()["received"]
    assert [m["text"] for m in sent_to(graph_sandbox[1], wa_tenant.phone_number_id)] == [
        "The backup answers."
    ]
    assert primary_seen == 1  # called once, never retried into the Retry-After
    async with sessions() as session:
        (turn,) = (await session.exec(select(Turn).where(Turn.tenant_id == wa_tenant.tenant.id))).all()
    assert (turn.outcome, turn.model, turn.fallback_used) == ("answered", backup, True)


async def test_status_callbacks_before_the_send_answer_leave_the_part_delivered(
    e2e_settings, ai_tenant, model, sessions
) -> None:  # type: ignore[no-untyped-def]
    state, name, _ = model
    state.script(name).default = ScriptedResponse(content="Racing statuses.")
    # the WhatsApp service runs for real with its own sandbox (what `switchboard run` mounts): its status
    # sender posts signed status webhooks to the service itself, before answering the send
    port = free_port()
    settings = e2e_settings(
        whatsapp_port=port,
        whatsapp_sandbox_enabled=True,
        whatsapp_graph_base_url=f"http://127.0.0.1:{port}/_sandbox/graph",  # the service's own sandbox
    )
    token = {"Authorization": f"Bearer {settings.secret('admin_token')}"}
    pid = ai_tenant.phone_number_id
    async with (
        serve_app(whatsapp_app(settings), port=settings.whatsapp_port) as url,
        httpx.AsyncClient(base_url=url) as http,
    ):
        control = f"{settings.whatsapp_sandbox_url}/_control"
        assert (
            await http.post(f"{control}/failures", json={"phone_number_id": pid, "mode": "status_first"})
        ).status_code == 401
        queued = await http.post(
            f"{control}/failures", json={"phone_number_id": pid, "mode": "status_first"}, headers=token
        )
        assert queued.json() == {"queued": 1}
        raw = text_body(phone_number_id=pid, wamid="wamid.RACE", text="hi")
        assert (
            await post_signed(http, url + "/webhooks/whatsapp", encode(raw), APP_SECRET)
        ).status_code == 200
        await run_worker_burst(settings)  # the turn, the send, and the status jobs the race enqueued
        sent = (await http.get(f"{control}/sent", params={"phone_number_id": pid}, headers=token)).json()
    assert [m["text"] for m in sent["messages"]] == ["Racing statuses."]
    async with sessions() as session:
        (part,) = (await session.exec(select(Outbox).where(Outbox.tenant_id == ai_tenant.tenant.id))).all()
    assert (part.status, part.external_id) == ("delivered", sent["messages"][0]["id"])


async def test_a_context_overflow_falls_back_to_the_larger_window_through_the_running_services(
    e2e_settings, wa_tenant, sessions, graph_sandbox
) -> None:  # type: ignore[no-untyped-def]
    settings = e2e_settings(model_server_control=True)
    token = {"Authorization": f"Bearer {settings.secret('admin_token')}"}
    small, large = unique_model("small"), unique_model("large")
    async with (
        serve_app(model_server_app(settings)) as url,
        httpx.AsyncClient(base_url=url, headers=token) as ctl,
    ):
        # the model table says 16k; the provider's real window is 4k, and its error says so
        await ctl.post(
            f"/control/{small}", json={"responses": [{"kind": "overflow", "context_limit_tokens": 4096}]}
        )
        await ctl.post(
            f"/control/{large}", json={"responses": [{"kind": "text", "content": "Large window here."}]}
        )
        await _use_deployments(
            sessions,
            wa_tenant.tenant.id,
            deployment(url, small, priority=1, max_input_tokens=16_000),
            deployment(url, large, priority=2, max_input_tokens=128_000),
        )
        async with channel_service(settings) as svc:
            await svc.post(
                text_body(phone_number_id=wa_tenant.phone_number_id, wamid=f"wamid.O{small}", text="hi")
            )
        await run_worker_burst(settings)
    assert [m["text"] for m in sent_to(graph_sandbox[1], wa_tenant.phone_number_id)] == ["Large window here."]
    async with sessions() as session:
        (turn,) = (await session.exec(select(Turn).where(Turn.tenant_id == wa_tenant.tenant.id))).all()
    assert (turn.model, turn.fallback_used) == (large, True)
