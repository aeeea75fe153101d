"""Admin API: upload (queued, run by a burst ARQ worker), status, list, (de)activate, delete, search."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from switchboard.queue import Queue

from services.orchestrator.main import create_app
from tests.utils import workers
from tests.utils.documents import PARTS, RETURNS_POLICY, SHIPPING, WARRANTY, make_pdf, make_xlsx

UPLOAD_LIMIT_BYTES = 50_000


@pytest.fixture
async def api(settings) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings.model_copy(update={"kb_max_upload_bytes": UPLOAD_LIMIT_BYTES}))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": f"Bearer {settings.secret('admin_token')}"}
        async with httpx.AsyncClient(transport=transport, base_url="http://test", headers=headers) as client:
            yield client


async def run_worker_burst(settings) -> None:
    """Process every queued ingestion once, as the background worker service would."""
    await workers.run_worker_burst(settings, Queue.background, poll_delay_s=0.05)


def _upload(name: str, data: bytes, declared: str = "application/octet-stream") -> dict:
    return {"files": {"file": (name, data, declared)}}


async def test_upload_is_queued_ingested_by_the_worker_and_searchable(api, make_tenant, settings):
    tenant = await make_tenant()
    base = f"/v1/admin/tenants/{tenant.slug}/knowledge"
    # declared as text/plain: the type is sniffed from the bytes
    response = await api.post(
        f"{base}/documents", **_upload("faq.pdf", make_pdf([RETURNS_POLICY, SHIPPING]), "text/plain")
    )
    assert response.status_code == 202, response.text
    body = response.json()
    assert body["action"] == "created" and body["job_id"]
    assert body["document"]["status"] == "pending"
    assert body["document"]["content_type"] == "application/pdf"
    doc_id = body["document"]["id"]

    await run_worker_burst(settings)

    document = (await api.get(f"{base}/documents/{doc_id}")).json()
    assert (document["status"], document["chunk_count"], document["error"]) == ("ready", 2, None)
    hits = (await api.get(f"{base}/search", params={"q": "How long does standard delivery take?"})).json()
    assert hits[0]["document"] == "faq.pdf" and hits[0]["page"] == 2
    assert (
        await api.get(f"{base}/search", params={"q": "Who won the football world cup in 1998?"})
    ).json() == []

    again = await api.post(f"{base}/documents", **_upload("faq.pdf", make_pdf([RETURNS_POLICY, SHIPPING])))
    assert again.status_code == 202
    assert (again.json()["action"], again.json()["job_id"]) == ("unchanged", None)
    listed = (await api.get(f"{base}/documents")).json()
    assert [d["filename"] for d in listed] == ["faq.pdf"]


async def test_deactivate_activate_reindex_delete(api, make_tenant, settings):
    tenant = await make_tenant()
    base = f"/v1/admin/tenants/{tenant.slug}/knowledge"
    data = make_xlsx({"Parts": [["Part", "Name", "Price"], *PARTS]})
    doc_id = (await api.post(f"{base}/documents", **_upload("parts.xlsx", data))).json()["document"]["id"]
    await run_worker_burst(settings)
    query = {"q": "FVAM-2050-B", "mode": "exact"}
    assert [h["sheet"] for h in (await api.get(f"{base}/search", params=query)).json()] == ["Parts"]

    off = await api.post(f"{base}/documents/{doc_id}/deactivate")
    assert off.status_code == 200 and off.json()["is_active"] is False
    assert (await api.get(f"{base}/search", params=query)).json() == []
    assert (await api.post(f"{base}/documents/{doc_id}/activate")).json()["is_active"] is True
    assert len((await api.get(f"{base}/search", params=query)).json()) == 1

    reindex = await api.post(f"{base}/reindex", json={})
    assert reindex.status_code == 202 and [d["status"] for d in reindex.json()] == ["pending"]
    await run_worker_burst(settings)
    assert (await api.get(f"{base}/documents/{doc_id}")).json()["status"] == "ready"
    no_body = await api.post(f"{base}/reindex")  # the body is optional
    assert no_body.status_code == 202 and [d["id"] for d in no_body.json()] == [doc_id]
    await run_worker_burst(settings)
    assert (await api.get(f"{base}/documents/{doc_id}")).json()["status"] == "ready"

    assert (await api.delete(f"{base}/documents/{doc_id}")).status_code == 204
    assert (await api.get(f"{base}/documents/{doc_id}")).status_code == 404
    assert (await api.get(f"{base}/search", params=query)).json() == []


async def test_corrupt_upload_is_refused_and_stores_nothing(api, make_tenant, settings):
    tenant = await make_tenant()
    base = f"/v1/admin/tenants/{tenant.slug}/knowledge"
    broken = make_pdf([WARRANTY])[:200]
    response = await api.post(f"{base}/documents", **_upload("broken.pdf", broken))
    assert response.status_code == 422
    assert response.json()["detail"]["reason"] == "corrupt"
    assert "corrupt PDF" in response.json()["detail"]["message"]
    assert (await api.get(f"{base}/documents")).json() == []


@pytest.mark.parametrize(
    ("name", "data", "status", "reason"),
    [
        ("big.txt", b"word " * (UPLOAD_LIMIT_BYTES // 5 + 1), 413, "too_large"),
        ("photo.pdf", b"\x89PNG\r\n\x1a\n" + b"\x00" * 100, 415, "unsupported"),
        ("empty.txt", b"", 422, "empty"),
    ],
)
async def test_bad_uploads_are_refused_with_a_reason(api, make_tenant, name, data, status, reason):
    tenant = await make_tenant()
    base = f"/v1/admin/tenants/{tenant.slug}/knowledge"
    response = await api.post(f"{base}/documents", **_upload(name, data))
    assert response.status_code == status
    assert response.json()["detail"]["reason"] == reason
    assert (await api.get(f"{base}/documents")).json() == []


async def test_admin_token_unknown_tenant_and_unknown_document(api, make_tenant):
    tenant = await make_tenant()
    base = f"/v1/admin/tenants/{tenant.slug}/knowledge"
    assert (await api.get(f"{base}/documents", headers={"Authorization": "Bearer wrong"})).status_code == 401
    assert (await api.get("/v1/admin/tenants/no-such-tenant/knowledge/documents")).status_code == 404
    missing = await api.post(f"{base}/documents/00000000-0000-0000-0000-000000000000/deactivate")
    assert missing.status_code == 404


async def test_graph_search_and_walk_after_the_worker_ingests(api, make_tenant, settings):
    from tests.utils.graph_corpus import documents

    tenant = await make_tenant()
    base = f"/v1/admin/tenants/{tenant.slug}/knowledge"
    for name, data in documents().items():
        assert (await api.post(f"{base}/documents", **_upload(name, data))).status_code == 202
    await run_worker_burst(settings)  # the worker has a model gateway; the offline model: deterministic
    spec = next(d for d in (await api.get(f"{base}/documents")).json() if d["filename"] == "v200-series.txt")
    assert spec["details"]["graph"] == {
        "extractor": "deterministic",
        "entities": 6,
        "mentions": 6,
        "relations": 4,
    }
    question = "Can the V200 valve be used with chlorine at 180 °C?"
    hits = (await api.get(f"{base}/search", params={"q": question, "mode": "graph"})).json()
    assert {h["document"] for h in hits[:3]} == {
        "v200-series.txt",
        "chemical-compatibility.csv",
        "ptfe-properties.txt",
    }
    row = next(h for h in hits if h["document"] == "chemical-compatibility.csv")
    assert row["attributes"] == {"row": 2, "keys": {"Material": "PTFE", "Fluid": "chlorine"}}
    walked = (await api.get(f"{base}/graph", params={"entity": ["teflon", "chlorine"], "hops": 1})).json()
    assert sorted(e["name"] for e in walked["entities"]) == ["PTFE", "chlorine"]
    assert {
        "subject": "PTFE",
        "relation": "compatible_with",
        "object": "chlorine",
        "document": "chemical-compatibility.csv",
    } in walked["relations"]
    assert walked["passages"][0]["text"] == "Material: PTFE; Fluid: chlorine; Rating: A"
    assert (await api.get(f"{base}/graph", params={"entity": ["x"] * 6})).status_code == 422
    modes = (await api.get("/openapi.json")).json()["paths"]["/v1/admin/tenants/{slug}/knowledge/search"]
    assert "graph" in str(modes["get"]["parameters"]) and "neighborhood" in modes["get"]["description"]
