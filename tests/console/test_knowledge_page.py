"""The knowledge page: several files at once, per-file ingestion progress, actions through the admin API."""

from __future__ import annotations

import re

from switchboard.console.knowledge_pages import ingest_percent
from switchboard.db.models import Role
from switchboard.queue import Queue

from tests.utils import workers
from tests.utils.console import log_in, new_user
from tests.utils.documents import RETURNS_POLICY, SHIPPING, make_pdf


async def test_upload_two_files_watch_them_ingest_and_try_a_question(
    console_client, sessions, make_tenant, settings
):
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with console_client() as client:
        me = await log_in(client, admin)
        page = await client.get(f"/t/{tenant.slug}/knowledge")
        assert page.status_code == 200 and "No documents yet." in page.text
        uploaded = await client.post(
            f"/t/{tenant.slug}/knowledge/upload",
            data={"csrf_token": me.csrf},
            files=[
                ("files", ("faq.pdf", make_pdf([RETURNS_POLICY, SHIPPING]), "application/pdf")),
                (
                    "files",
                    ("notes.txt", b"Our shop opens at 9:00 and closes at 18:00 on weekdays.", "text/plain"),
                ),
                ("files", ("empty.txt", b"", "text/plain")),
            ],
        )
        assert uploaded.status_code == 200, uploaded.text[:1000]
        assert 'data-document="faq.pdf" data-status="pending"' in uploaded.text
        assert 'data-document="notes.txt" data-status="pending"' in uploaded.text
        assert "empty.txt:" in uploaded.text  # refused on its own line, the others went on
        assert 'hx-trigger="every 2s"' in uploaded.text  # the table polls while ingesting

        await workers.run_worker_burst(settings, Queue.background, poll_delay_s=0.05)

        rows = await client.get(f"/t/{tenant.slug}/knowledge/rows")
        assert 'data-document="faq.pdf" data-status="ready"' in rows.text
        assert 'value="100"' in rows.text and "every 2s" not in rows.text
        assert re.search(r'data-document="faq.pdf".*?<td>2</td>', rows.text, re.S)  # two chunks (two pages)

        hits = await client.get(
            f"/t/{tenant.slug}/knowledge/try", params={"q": "How long does standard delivery take?"}
        )
        assert hits.status_code == 200 and "faq.pdf" in hits.text and "p. 2" in hits.text
        for mode in ("vector", "exact", "graph", "neighborhood"):  # every search mode can be tried
            assert f'<option value="{mode}">' in page.text
        near = await client.get(
            f"/t/{tenant.slug}/knowledge/try",
            params={"q": "How long does standard delivery take?", "mode": "neighborhood"},
        )
        assert near.status_code == 200 and "p. 2" in near.text

        # the row's buttons call the admin API with the session and its CSRF header
        doc_id = re.search(r"/knowledge/documents/([0-9a-f-]{36})/deactivate", rows.text).group(1)
        api = f"/v1/admin/tenants/{tenant.slug}/knowledge/documents/{doc_id}/deactivate"
        assert (await client.post(api)).status_code == 403  # no CSRF header
        done = await client.post(api, headers={"X-CSRF-Token": me.csrf})
        assert done.status_code == 200 and done.json()["is_active"] is False


async def test_agents_may_not_manage_knowledge(console_client, sessions, make_tenant):
    tenant = await make_tenant()
    agent = await new_user(sessions, role=Role.agent, tenant_id=tenant.id)
    async with console_client() as client:
        me = await log_in(client, agent)
        assert (await client.get(f"/t/{tenant.slug}/knowledge")).status_code == 403
        refused = await client.get(
            f"/v1/admin/tenants/{tenant.slug}/knowledge/documents", headers={"Accept": "application/json"}
        )
        assert refused.status_code == 403
        assert me.csrf


def test_progress_percent_follows_the_ingestion_stages():
    assert ingest_percent("pending", None) == 0
    assert ingest_percent("processing", {"stage": "parse", "done": 1, "total": 1}) == 5
    assert ingest_percent("processing", {"stage": "embed", "done": 1, "total": 4}) == 30
    assert ingest_percent("processing", {"stage": "store", "done": 3, "total": 3}) == 95
    assert ingest_percent("ready", None) == ingest_percent("failed", None) == 100
