"""Erase and export a customer, reopen a conversation and keep private notes through ``/api/v1``, with
real keys against the real database, queue and background worker."""

from __future__ import annotations

import io
import json
import zipfile

from arq.jobs import Job, JobStatus
from switchboard.queue import Queue
from switchboard.queue.keys import erase_customer_job_id

from tests.utils.workers import run_worker_burst


async def test_an_erase_needs_one_of_the_customers_identities_typed_again(
    world, api, make_key, arq_pool
) -> None:  # type: ignore[no-untyped-def]
    key = await make_key(world.tenant, scopes=["customers:write"])
    customer = world.ids["customer_id"]
    async with api(key) as client:
        refused = await client.post(f"/api/v1/customers/{customer}/erase", json={"confirm": "+1 555 0000000"})
        assert refused.status_code == 422
        assert refused.headers["content-type"].startswith("application/problem+json")
        assert refused.json()["code"] == "identity_not_confirmed"
        assert (
            await Job(erase_customer_job_id(customer), arq_pool, _queue_name=Queue.background.value).status()
            == JobStatus.not_found
        )
        accepted = await client.post(
            f"/api/v1/customers/{customer}/erase", json={"confirm": "+" + world.customer_identity}
        )
    assert (accepted.status_code, accepted.json()) == (202, {"status": "queued"})
    assert (
        await Job(erase_customer_job_id(customer), arq_pool, _queue_name=Queue.background.value).status()
        == JobStatus.queued
    )


async def test_an_export_is_pending_then_a_zip_with_every_message(world, api, api_app, make_key) -> None:  # type: ignore[no-untyped-def]
    key = await make_key(world.tenant, scopes=["customers:read"])
    async with api(key) as client:
        started = await client.post(f"/api/v1/customers/{world.ids['customer_id']}/exports")
        assert started.status_code == 202, started.text
        download = started.json()["download"]
        pending = await client.get(download)
        assert (pending.status_code, pending.headers.get("retry-after")) == (202, "5")
        await run_worker_burst(api_app.state.settings, Queue.background)
        ready = await client.get(download)
        unknown = await client.get("/api/v1/customers/exports/" + "0" * 32)
    assert ready.status_code == 200 and ready.headers["content-type"] == "application/zip"
    document = json.loads(zipfile.ZipFile(io.BytesIO(ready.content)).read("customer.json"))
    texts = json.dumps(document)
    assert "We open at 9." in texts and "hello?" in texts
    assert unknown.status_code == 404 and unknown.json()["code"] == "not_found"


async def test_a_closed_conversation_reopens_once(world, api, make_key) -> None:  # type: ignore[no-untyped-def]
    key = await make_key(world.tenant, scopes=["conversations:write"])
    conversation = world.ids["conversation_id"]
    async with api(key) as client:
        closed = await client.post(f"/api/v1/conversations/{conversation}/close")
        reopened = await client.post(f"/api/v1/conversations/{conversation}/reopen")
        again = await client.post(f"/api/v1/conversations/{conversation}/reopen")
    assert closed.json()["status"] == "closed"
    assert (reopened.status_code, reopened.json()["status"]) == (200, "ai")
    assert again.status_code == 409 and again.json()["code"] == "conflict"


async def test_a_note_is_listed_for_the_team_and_is_no_message(world, api, make_key) -> None:  # type: ignore[no-untyped-def]
    key = await make_key(world.tenant, scopes=["conversations:write", "conversations:read"])
    conversation = world.ids["conversation_id"]
    async with api(key) as client:
        kept = await client.post(
            f"/api/v1/conversations/{conversation}/notes", json={"text": "VIP: refund approved by Ana"}
        )
        notes = await client.get(f"/api/v1/conversations/{conversation}/notes")
        messages = await client.get(f"/api/v1/conversations/{conversation}/messages")
        empty = await client.post(f"/api/v1/conversations/{conversation}/notes", json={"text": ""})
    assert kept.status_code == 201 and kept.json()["author_name"] == "API: test"
    assert [n["text"] for n in notes.json()] == ["VIP: refund approved by Ana"]
    assert "VIP" not in messages.text
    assert empty.status_code == 422
