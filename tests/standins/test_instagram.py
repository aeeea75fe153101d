"""The Instagram sandbox's control endpoints: loopback only, and behind the admin token in the service."""

from __future__ import annotations

import httpx
from fastapi import FastAPI
from switchboard.standins.instagram import instagram_sandbox_router


def _client(token: str | None, host: str = "127.0.0.1") -> httpx.AsyncClient:
    app = FastAPI()
    app.include_router(instagram_sandbox_router(admin_token=token))
    transport = httpx.ASGITransport(app=app, client=(host, 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://sandbox/_sandbox/instagram")


async def test_control_endpoints_need_the_admin_token_when_the_service_has_one() -> None:
    async with _client("admin-secret") as client:
        missing = await client.get("/_control/sent")
        wrong = await client.get("/_control/sent", headers={"Authorization": "Bearer nope"})
        right = await client.get("/_control/sent", headers={"Authorization": "Bearer admin-secret"})
        upload = await client.put("/_control/cdn/a.jpg", content=b"\xff\xd8")
    assert [r.status_code for r in (missing, wrong, right, upload)] == [401, 401, 200, 401]
    assert right.json() == {"messages": [], "last_seq": 0}


async def test_control_endpoints_refuse_a_client_off_loopback() -> None:
    async with _client(None, host="203.0.113.9") as client:
        response = await client.get("/_control/sent")
    assert response.status_code == 403
