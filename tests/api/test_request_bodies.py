"""Request bodies at the HTTP boundary: the caller is checked before an upload's body is read, and every
service stops reading a body at its limit (413), with or without ``Content-Length``.

Each service runs under uvicorn on loopback behind :class:`ReadCounter`, which counts the body bytes
the app pulled from the server: what it would have parsed or spooled to disk.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from starlette.types import Message, Receive, Scope, Send
from switchboard.body_limit import limit_body
from switchboard.db.models import Role
from switchboard.knowledge.upload_form import FORM_OVERHEAD_BYTES
from switchboard.settings import Settings

from tests.utils.console import log_in, new_user
from tests.utils.servers import serve_app
from tests.utils.whatsapp import APP_SECRET, connect_whatsapp, encode, text_body

CHUNK_BYTES = 64 * 1024
"""Size of each piece a chunked test body is sent in."""
BIG_UPLOAD_BYTES = 8 * 1024 * 1024
"""An upload far above the default body limit and below the knowledge limit (20 MiB)."""
SERVER_PIECE_BYTES = 1024 * 1024
"""Slack for what the server hands the app in one piece (uvicorn: what arrived since the last read)."""
BOUNDARY = "switchboard-test-boundary"


class ReadCounter:
    """ASGI wrapper: ``read_bytes`` is how many request body bytes the wrapped app received."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.read_bytes = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def counted() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                self.read_bytes += len(message.get("body", b""))
            return message

        await self.app(scope, counted if scope["type"] == "http" else receive, send)


@asynccontextmanager
async def served(app: Any) -> AsyncIterator[tuple[str, ReadCounter]]:
    """``(url, counter)`` of ``app`` under uvicorn, once its warm-ups are done (no 503 ``warming``)."""
    counter = ReadCounter(app)
    async with serve_app(counter) as url, httpx.AsyncClient(base_url=url) as client:
        deadline = time.monotonic() + 30
        while (await client.get("/healthz")).json().get("status") == "warming":
            assert time.monotonic() < deadline, "the service stayed warming"
            await asyncio.sleep(0.1)
        yield url, counter


def multipart_file(field: str, filename: str, size: int) -> tuple[bytes, dict[str, str]]:
    """A multipart form with one text file of ``size`` bytes, and its Content-Type header."""
    head = (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{field}"; filename="{filename}"\r\n'
        "Content-Type: text/plain\r\n\r\n"
    ).encode()
    body = head + b"spare parts and prices\n" * (size // 23) + f"\r\n--{BOUNDARY}--\r\n".encode()
    return body, {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}


async def chunked(body: bytes) -> AsyncIterator[bytes]:
    """``body`` as an async iterator: httpx then sends it chunked, without ``Content-Length``."""
    for start in range(0, len(body), CHUNK_BYTES):
        yield body[start : start + CHUNK_BYTES]


def orchestrator(settings: Settings, **overrides: Any) -> Any:
    from services.orchestrator.main import create_app

    return create_app(settings.model_copy(update=overrides))


def console(settings: Settings, **overrides: Any) -> Any:
    from services.console.main import create_app

    return create_app(settings.model_copy(update=overrides))


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
async def test_an_upload_without_credentials_is_refused_before_its_body_is_read(
    settings, make_tenant, framing
):
    tenant = await make_tenant()
    body, headers = multipart_file("file", "catalog.txt", BIG_UPLOAD_BYTES)
    content = body if framing == "content-length" else chunked(body)
    async with served(orchestrator(settings)) as (url, counter), httpx.AsyncClient(base_url=url) as client:
        for credentials in ({}, {"Authorization": "Bearer sbu_not-a-token"}):
            response = await client.post(
                f"/v1/admin/tenants/{tenant.slug}/knowledge/documents",
                content=content if framing == "content-length" else chunked(body),
                headers={**headers, **credentials},
            )
            assert response.status_code == 401, response.text
    assert counter.read_bytes == 0


async def test_a_console_upload_without_a_session_is_refused_before_its_body_is_read(settings, make_tenant):
    tenant = await make_tenant()
    body, headers = multipart_file("files", "catalog.txt", BIG_UPLOAD_BYTES)
    async with served(console(settings)) as (url, counter), httpx.AsyncClient(base_url=url) as client:
        response = await client.post(
            f"/t/{tenant.slug}/knowledge/upload", content=chunked(body), headers=headers
        )
    assert response.status_code == 401, response.text
    assert counter.read_bytes == 0


async def test_a_console_upload_by_a_role_without_access_is_refused_before_its_body_is_read(
    settings, sessions, make_tenant
):
    tenant = await make_tenant()
    agent = await new_user(sessions, role=Role.agent, tenant_id=tenant.id)
    body, headers = multipart_file("files", "catalog.txt", BIG_UPLOAD_BYTES)
    async with served(console(settings)) as (url, counter), httpx.AsyncClient(base_url=url) as client:
        logged_in = await log_in(client, agent)
        read_by_login = counter.read_bytes
        response = await client.post(
            f"/t/{tenant.slug}/knowledge/upload",
            content=chunked(body),
            headers={**headers, "X-CSRF-Token": logged_in.csrf},
        )
    assert response.status_code == 403, response.text
    assert counter.read_bytes == read_by_login


async def test_an_upload_over_the_knowledge_limit_is_refused_while_it_streams(
    settings, make_tenant, stops_at_the_queue
):
    tenant = await make_tenant()
    limit = 50_000
    admin = {"Authorization": f"Bearer {settings.secret('admin_token')}"}
    path = f"/v1/admin/tenants/{tenant.slug}/knowledge/documents"
    app = orchestrator(settings, kb_max_upload_bytes=limit)
    async with served(app) as (url, counter), httpx.AsyncClient(base_url=url, headers=admin) as client:
        body, headers = multipart_file("file", "catalog.txt", BIG_UPLOAD_BYTES)
        response = await client.post(path, content=chunked(body), headers=headers)
        assert response.status_code == 413, response.text
        assert response.json()["detail"]["reason"] == "too_large"
        assert str(limit) in response.json()["detail"]["message"]
        assert counter.read_bytes <= limit + FORM_OVERHEAD_BYTES + SERVER_PIECE_BYTES

        counter.read_bytes = 0
        declared = await client.post(path, content=body, headers=headers)  # Content-Length over the limit
        assert declared.status_code == 413, declared.text
        assert counter.read_bytes == 0

        small, headers = multipart_file("file", "catalog.txt", 20_000)
        accepted = await client.post(path, content=chunked(small), headers=headers)
        assert accepted.status_code == 202, accepted.text
        assert accepted.json()["document"]["filename"] == "catalog.txt"


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
async def test_a_json_body_over_the_service_limit_is_refused_while_it_is_read(settings, make_tenant, framing):
    """An ordinary JSON route (FastAPI parses its body before any dependency): the service limit
    stops the read, whoever sends it."""
    tenant = await make_tenant()
    limit = 16 * 1024
    body = b'{"persona": {"name": "' + b"x" * BIG_UPLOAD_BYTES + b'"}}'
    admin = {"Authorization": f"Bearer {settings.secret('admin_token')}", "Content-Type": "application/json"}
    async with (
        served(orchestrator(settings, max_body_bytes=limit)) as (url, counter),
        httpx.AsyncClient(base_url=url) as client,
    ):
        for headers in ({"Content-Type": "application/json"}, admin):
            counter.read_bytes = 0
            response = await client.put(
                f"/v1/admin/tenants/{tenant.slug}/settings",
                content=body if framing == "content-length" else chunked(body),
                headers=headers,
            )
            assert response.status_code == 413, response.text
            assert str(limit) in response.json()["detail"]
            assert (
                counter.read_bytes == 0
                if framing == "content-length"
                else counter.read_bytes <= limit + SERVER_PIECE_BYTES
            )


async def test_every_service_refuses_a_chunked_body_over_its_limit(make_settings):
    """The console, a channel service and the tool server, each on its own default limit."""
    from services.console.main import create_app as console_app
    from services.mcp_tools.main import create_app as tools_app
    from services.whatsapp.main import create_app as whatsapp_app

    limit = 8 * 1024
    settings = make_settings(max_body_bytes=limit)
    body = b"language=en&next=/" + b"&x=" + b"y" * BIG_UPLOAD_BYTES
    for create_app, path in ((console_app, "/language"), (whatsapp_app, "/_nowhere"), (tools_app, "/mcp")):
        async with served(create_app(settings)) as (url, counter), httpx.AsyncClient(base_url=url) as client:
            response = await client.post(
                path,
                content=chunked(body),
                headers={
                    "Content-Type": "application/x-www-form-urlencoded",
                    "Authorization": f"Bearer {settings.secret('mcp_service_token')}",
                },
            )
            if path != "/_nowhere":  # a route that reads no body answers without reading it
                assert response.status_code == 413, (path, response.text)
            assert counter.read_bytes <= limit + SERVER_PIECE_BYTES, path


async def test_a_webhook_above_the_service_default_and_within_its_channel_limit_is_accepted(
    make_settings, sessions, make_tenant, stops_at_the_queue
):
    """A batch of deliveries bigger than ``MAX_BODY_BYTES``: the channel's own limit is the one that counts."""
    settings = make_settings(max_body_bytes=2048, whatsapp_max_body_bytes=200_000)
    tenant = await make_tenant()
    account = await connect_whatsapp(sessions, tenant, settings)
    delivery = text_body(phone_number_id=account.external_account_id, wamid="wamid.big-batch", text="hi")
    value = delivery["entry"][0]["changes"][0]["value"]
    value["messages"] = [
        {**value["messages"][0], "id": f"wamid.batch-{n}", "text": {"body": f"question {n} " + "z" * 200}}
        for n in range(40)
    ]
    raw = encode(delivery)
    assert 2048 < len(raw) < 200_000
    from switchboard.channels.meta import sign_body

    from services.whatsapp.main import create_app

    async with served(create_app(settings)) as (url, counter), httpx.AsyncClient(base_url=url) as client:
        headers = {"Content-Type": "application/json", "X-Hub-Signature-256": sign_body(raw, APP_SECRET)}
        response = await client.post("/webhooks/whatsapp", content=chunked(raw), headers=headers)
        assert response.status_code == 200, response.text
        assert counter.read_bytes == len(raw)

        too_big = encode({**delivery, "padding": "p" * BIG_UPLOAD_BYTES})
        headers["X-Hub-Signature-256"] = sign_body(too_big, APP_SECRET)
        counter.read_bytes = 0
        refused = await client.post("/webhooks/whatsapp", content=chunked(too_big), headers=headers)
        assert refused.status_code == 413
        assert refused.json() == {"error": "body too large"}  # the channel's own answer, its own words
        assert counter.read_bytes <= 200_000 + SERVER_PIECE_BYTES


def test_the_shipped_proxy_caps_every_body():
    """infra/Caddyfile: each public webhook route and the console carry a ``request_body`` cap."""
    text = (Path(__file__).resolve().parents[2] / "infra" / "Caddyfile").read_text()
    for block in re.findall(r"handle /\S+ \{(.*?)\n\t\}", text, flags=re.DOTALL):
        assert "reverse_proxy" not in block or "max_size" in block, block
    console_site = text[text.index("console.{$SWITCHBOARD_DOMAIN} {") :]
    assert "request_body @uploads {\n\t\tmax_size 21MiB" in console_site
    assert "request_body @not_uploads {\n\t\tmax_size 1MiB" in console_site
    assert Settings(_env_file=None).kb_max_upload_bytes + FORM_OVERHEAD_BYTES <= 21 * 1024 * 1024


@hypothesis_settings(max_examples=300, deadline=None)
@given(
    chunks=st.lists(st.integers(min_value=0, max_value=5000), max_size=30),
    limit=st.integers(min_value=0, max_value=40_000),
    declare=st.booleans(),
)
def test_a_body_is_read_up_to_its_limit_however_it_is_chunked(chunks, limit, declare):
    """``limit_body`` on its own: the app gets every byte of a body within the limit, and of one over
    it never more than the limit plus the piece that crossed it (nothing when the declared length is
    over), answered 413."""
    total = sum(chunks)
    messages = [{"type": "http.request", "body": b"x" * size, "more_body": True} for size in chunks]
    messages.append({"type": "http.request", "body": b"", "more_body": False})
    headers = [(b"content-length", str(total).encode())] if declare else []
    scope = {"type": "http", "path": "/p", "headers": headers}
    sent: list[dict] = []
    got = bytearray()

    async def receive() -> dict:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    async def app(scope, receive, send) -> None:
        while True:
            message = await receive()
            got.extend(message.get("body", b""))
            if not message.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    asyncio.run(limit_body(app, limit, scope, receive, send))
    status = sent[0]["status"]
    if total <= limit:
        assert (status, len(got)) == (200, total)
    else:
        assert status == 413
        assert len(got) <= limit
        if declare:
            assert got == b""
