"""Hostile uploads: a file built to stall or exhaust the parser is refused as "file too complex".

Every file is built here, small on disk and costly to parse: a ZIP bomb (a DOCX of 240 KB that
unpacks to 200 MiB), a billion-laughs XLSX, a spreadsheet of 2^20 x 2^14 cells in 5 KB, a PDF of
a few kilobytes that keeps pypdf busy for about a minute, and a PDF whose stream unpacks past
pypdf's limit. Limits are small here so the tests stay fast: each hostile parse ends within about
a second, and each test leaves plenty of the other resource so the outcome is the same on a busy
machine. The parse runs in a real child process (``parse_isolated``), as uploads do.
"""

from __future__ import annotations

import io
import zipfile

import httpx
import openpyxl
import pytest
from sqlmodel import func, select
from switchboard.db.models import KnowledgeDocument, KnowledgeSource, KnowledgeSourceFile, SourceStatus
from switchboard.db.tenant_scope import TenantScope
from switchboard.knowledge import (
    DocumentTooComplex,
    ParseLimits,
    ingest_source,
    list_sources,
    parse_document,
    parse_isolated,
    register_upload,
)
from switchboard.knowledge.ingest import sha256_hex
from switchboard.settings import Settings

from services.orchestrator.main import create_app
from tests.utils.documents import (
    MIB,
    RETURNS_POLICY,
    make_billion_laughs_xlsx,
    make_deflate_bomb_pdf,
    make_docx,
    make_pdf,
    make_slow_pdf,
    make_sparse_xlsx,
    make_zip_bomb,
)

MEMORY_BOUND = ParseLimits(timeout_s=60.0, memory_limit_bytes=64 * MIB)
"""Little memory and plenty of time: a file that needs memory fails on memory, however busy the machine."""
TIME_BOUND = ParseLimits(timeout_s=1.0, memory_limit_bytes=1024 * MIB)
"""Little time and plenty of memory: a slow file fails on time."""


def _settings(settings: Settings, limits: ParseLimits) -> Settings:
    """The same limits as settings (the ingestion path and the API read them from there)."""
    return settings.model_copy(
        update={
            "kb_parse_timeout_s": limits.timeout_s,
            "kb_parse_memory_limit_mb": limits.memory_limit_bytes // MIB,
        }
    )


def _refusal(data: bytes, filename: str, limits: ParseLimits = MEMORY_BOUND) -> tuple[str, str]:
    with pytest.raises(DocumentTooComplex) as caught:
        parse_isolated(data, filename, limits)
    return caught.value.reason, str(caught.value)


def test_a_zip_bomb_is_refused_before_it_is_unpacked():
    bomb = make_zip_bomb(make_docx([RETURNS_POLICY]), "word/document.xml", unpacked_mib=200)
    with zipfile.ZipFile(io.BytesIO(bomb)) as archive:
        assert archive.testzip() is None  # a valid archive: every part passes its CRC check
        unpacked = sum(info.file_size for info in archive.infolist())
    assert len(bomb) < 300_000 and 200 * MIB < unpacked < 202 * MIB
    assert _refusal(bomb, "bomb.docx") == (
        "too_complex",
        f"bomb.docx: file too complex: its parts unpack to {unpacked / MIB:.0f} MiB, over the 64 MiB limit "
        "(a ZIP bomb?)",
    )


def test_a_billion_laughs_xlsx_is_refused_by_defusedxml():
    assert openpyxl.DEFUSEDXML is True  # openpyxl picks defusedxml up when it is installed
    assert _refusal(make_billion_laughs_xlsx(), "laughs.xlsx") == (
        "too_complex",
        "laughs.xlsx: file too complex: XML entity declarations (an XML bomb?): "
        "EntitiesForbidden(name='lol', system_id=None, public_id=None)",
    )


def test_a_spreadsheet_of_a_billion_empty_cells_hits_the_memory_cap():
    sparse = make_sparse_xlsx()
    assert len(sparse) < 10_000
    assert _refusal(sparse, "sparse.xlsx") == (
        "too_complex",
        "sparse.xlsx: file too complex: parsing needed more than 64 MiB of memory",
    )


def test_a_pdf_that_takes_minutes_to_read_hits_the_timeout():
    slow = make_slow_pdf(operators=2_000_000)  # pypdf reads about 40,000 of them a second here
    assert len(slow) < 100_000
    assert _refusal(slow, "slow.pdf", TIME_BOUND) == (
        "too_complex",
        "slow.pdf: file too complex: parsing took longer than 1 s",
    )


def test_a_pdf_stream_over_pypdfs_limit_is_too_complex():
    bomb = make_deflate_bomb_pdf(unpacked_mib=100)
    assert len(bomb) < 200_000
    with pytest.raises(DocumentTooComplex) as caught:
        parse_isolated(bomb, "flate.pdf", ParseLimits(timeout_s=10.0, memory_limit_bytes=512 * MIB))
    assert caught.value.reason == "too_complex"
    assert str(caught.value).startswith(
        "flate.pdf: file too complex: over pypdf's limits (Limit reached while decompressing."
    )


def test_an_ordinary_file_parses_the_same_in_the_child_process():
    data = make_pdf([RETURNS_POLICY])
    assert parse_isolated(data, "faq.pdf", MEMORY_BOUND) == parse_document(data, "faq.pdf")


async def test_an_upload_too_complex_to_parse_stores_nothing(make_tenant, sessions, settings):
    tenant = await make_tenant()
    tight = _settings(settings, MEMORY_BOUND)
    with pytest.raises(DocumentTooComplex) as caught:
        async with sessions() as session, session.begin():
            await register_upload(
                session, tight, tenant_id=tenant.id, filename="sparse.xlsx", data=make_sparse_xlsx()
            )
    assert str(caught.value) == "sparse.xlsx: file too complex: parsing needed more than 64 MiB of memory"
    async with sessions() as session:
        assert await list_sources(session, tenant_id=tenant.id) == []


async def test_ingestion_of_a_stored_file_too_complex_fails_and_stores_no_chunk(
    make_tenant, sessions, settings
):
    """A file stored while the limits were larger is ingested under smaller ones (a re-index)."""
    tenant = await make_tenant()
    data = make_slow_pdf(operators=2_000_000)
    async with sessions() as session, session.begin():
        scope = TenantScope(session, tenant.id)
        source = scope.add(
            KnowledgeSource(
                tenant_id=tenant.id,
                filename="slow.pdf",
                content_hash=sha256_hex(data),
                content_type="application/pdf",
                size_bytes=len(data),
                status=SourceStatus.pending.value,
            )
        )
        await session.flush()
        scope.add(KnowledgeSourceFile(tenant_id=tenant.id, source_id=source.id, data=data))
    report = await ingest_source(
        sessions,
        _settings(settings, TIME_BOUND),
        tenant_id=tenant.id,
        source_id=source.id,
        content_hash=sha256_hex(data),
    )
    assert (report.status, report.chunk_count, report.details) == ("failed", 0, {"failure": "too_complex"})
    assert report.error == "slow.pdf: file too complex: parsing took longer than 1 s"
    async with sessions() as session:
        stored = await session.get(KnowledgeSource, source.id)
        chunks = await session.exec(
            select(func.count())
            .select_from(KnowledgeDocument)
            .where(KnowledgeDocument.tenant_id == tenant.id)
        )
        assert (stored.status, stored.error, chunks.one()) == (
            "failed",
            "slow.pdf: file too complex: parsing took longer than 1 s",
            0,
        )


async def test_the_upload_api_answers_422_too_complex(make_tenant, settings):
    tenant = await make_tenant()
    app = create_app(_settings(settings, MEMORY_BOUND))
    async with app.router.lifespan_context(app):
        headers = {"Authorization": f"Bearer {settings.secret('admin_token')}"}
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test", headers=headers) as api:
            base = f"/v1/admin/tenants/{tenant.slug}/knowledge"
            files = {"file": ("laughs.xlsx", make_billion_laughs_xlsx(), "application/octet-stream")}
            response = await api.post(f"{base}/documents", files=files)
            assert response.status_code == 422
            assert response.json()["detail"] == {
                "reason": "too_complex",
                "message": "laughs.xlsx: file too complex: XML entity declarations (an XML bomb?): "
                "EntitiesForbidden(name='lol', system_id=None, public_id=None)",
            }
            assert (await api.get(f"{base}/documents")).json() == []


def _children(pid: int) -> set[int]:
    return {int(c) for c in open(f"/proc/{pid}/task/{pid}/children").read().split()}


def _pipes(pid: int) -> set[str]:
    import os

    links = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            links.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:  # closed meanwhile
            continue
    return {link for link in links if link.startswith("pipe:")}


def _spare_of(helper_pid: int) -> int:
    """The one child the helper keeps waiting (forked right after it answered, the finished one reaped
    after that: wait until exactly one is left)."""
    import time

    deadline = time.monotonic() + 30
    while len(children := _children(helper_pid)) != 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(children) == 1, children
    return children.pop()


def _spare_and_pipes(helper_pid: int) -> tuple[int, set[str]]:
    """:func:`_spare_of` and the pipes it holds. Right after an answer the helper's one child can still be
    the finished one (the new spare not forked yet); once it is reaped, the one left is the spare."""
    for _ in range(50):
        spare = _spare_of(helper_pid)
        try:
            return spare, _pipes(spare)
        except FileNotFoundError:  # the finished child, reaped meanwhile: look again
            continue
    raise AssertionError(f"helper {helper_pid} kept no waiting child")


def test_the_helper_keeps_a_fresh_child_waiting_for_each_file_without_the_services_pipes():
    import os

    from switchboard.knowledge import isolation

    assert parse_isolated(RETURNS_POLICY.encode(), "a.txt", MEMORY_BOUND).sections[0].text.strip()
    import time

    helpers = [h for h in isolation._pool._all if h.process.poll() is None]
    assert helpers
    service_ends = {
        os.readlink(f"/proc/self/fd/{fd}")
        for h in helpers
        for fd in (h.requests.fileno(), h.answers.fileno())
    }
    for helper in helpers:
        assert {os.readlink(f"/proc/self/fd/{helper.requests.fileno()}")} <= _pipes(helper.process.pid)
    # a waiting child holds none of them, so a helper's exit stays visible. Right after an answer (here,
    # or a helper another test started) the child seen may still be the one that did the work, which
    # holds them until it exits: look again until the waiting one is there.
    spare_pipes: dict[int, tuple[int, set[str]]] = {}
    deadline = time.monotonic() + 30
    for helper in helpers:
        while True:
            spare_pipes[helper.process.pid] = _spare_and_pipes(helper.process.pid)
            if not service_ends & spare_pipes[helper.process.pid][1] or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    spares = {pid: spare for pid, (spare, _) in spare_pipes.items()}
    for _, pipes in spare_pipes.values():
        assert not service_ends & pipes
    data = make_docx([RETURNS_POLICY])
    assert parse_isolated(data, "b.docx", MEMORY_BOUND) == parse_document(data, "b.docx")
    # the helper that parsed b.docx gave it to its waiting child, then forked a new one and reaped the
    # old (the answer comes first: poll until one helper's only child is a new one)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        now = {pid: _children(pid) for pid in spares}
        if any(len(kids) == 1 and kids != {spares[pid]} for pid, kids in now.items()):
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"no helper replaced its waiting child: {spares} -> {now}")
