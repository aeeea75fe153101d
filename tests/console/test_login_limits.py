"""The login limits under concurrency and behind a reverse proxy, and login CSRF."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import switchboard.users.accounts as auth_module
import yaml
from switchboard.db.models import Role

from services.console.main import create_app
from tests.utils.console import PASSWORD, new_user

ROOT = Path(__file__).resolve().parents[2]
PROXY = "172.18.0.5"
"""The reverse proxy's address on its network (Caddy on the compose network, the load balancer)."""


@pytest.fixture
async def proxied_app(make_settings: Callable[..., Any]) -> AsyncIterator[Any]:
    """The console behind a proxy at :data:`PROXY`, whose ``X-Forwarded-For`` it trusts; strict limits."""
    app = create_app(
        make_settings(
            forwarded_allow_ips=f"{PROXY},127.0.0.1",
            console_login_max_attempts=5,
            console_login_max_attempts_per_ip=20,
        )
    )
    async with app.router.lifespan_context(app):
        yield app


def _client(app: Any, peer: str, **headers: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app, client=(peer, 40000)),
        base_url="http://console.test",
        headers={"Accept": "text/html", **headers},
    )


def _login(email: str, password: str) -> dict[str, str]:
    return {"email": email, "password": password, "next": "/"}


async def test_concurrent_wrong_guesses_are_checked_at_most_the_limit(
    console_client, sessions, make_tenant, monkeypatch
):
    tenant = await make_tenant()
    user = await new_user(sessions, role=Role.agent, tenant_id=tenant.id)
    checked: list[str] = []
    real_verify = auth_module.verify_password

    def counting_verify(password: str, password_hash: str) -> tuple[bool, str | None]:
        checked.append(password)
        return real_verify(password, password_hash)

    monkeypatch.setattr(auth_module, "verify_password", counting_verify)
    async with console_client() as client:
        answers = await asyncio.gather(
            *(client.post("/login", data=_login(user.email, f"guess number {n:02d}")) for n in range(20))
        )
        codes = sorted(a.status_code for a in answers)
        assert codes == [401] * 5 + [429] * 15, codes
        assert len(checked) == 5  # the other 15 were refused before their password was looked at
        # the account stays locked for the window, even for the right password
        late = await client.post("/login", data=_login(user.email, PASSWORD))
    assert late.status_code == 429 and len(checked) == 5


async def test_a_flood_through_the_proxy_does_not_lock_out_another_user(proxied_app, sessions, make_tenant):
    tenant = await make_tenant()
    victim, bystander = (
        await new_user(sessions, role=Role.agent, tenant_id=tenant.id),
        await new_user(sessions, role=Role.agent, tenant_id=tenant.id),
    )
    # every browser arrives from the proxy's address, the attacker without a forwarded header at all
    async with _client(proxied_app, PROXY) as attacker:
        for n in range(25):
            email = victim.email if n < 3 else f"nobody-{uuid.uuid4().hex[:6]}@example.com"
            refused = await attacker.post("/login", data=_login(email, "not the password"))
            assert refused.status_code in (401, 429)
        # the address is past its limit now: a guess at an account already under attack is refused unchecked
        again = await attacker.post("/login", data=_login(victim.email, PASSWORD))
        assert again.status_code == 429
    async with _client(proxied_app, PROXY) as colleague:
        ok = await colleague.post("/login", data=_login(bystander.email, PASSWORD))
    assert ok.status_code == 303 and ok.headers["location"] == "/"


async def test_a_typo_from_a_busy_address_still_lets_the_person_in(proxied_app, sessions, make_tenant):
    tenant = await make_tenant()
    user = await new_user(sessions, role=Role.agent, tenant_id=tenant.id)
    async with _client(proxied_app, PROXY) as attacker:
        for _ in range(21):
            await attacker.post("/login", data=_login(f"x-{uuid.uuid4().hex[:6]}@example.com", "wrong one!!"))
    async with _client(proxied_app, PROXY) as person:
        typo = await person.post("/login", data=_login(user.email, PASSWORD + "x"))
        ok = await person.post("/login", data=_login(user.email, PASSWORD))
    assert (typo.status_code, ok.status_code) == (401, 303)


async def test_trusted_forwarded_addresses_are_counted_apart(proxied_app, sessions, make_tenant):
    tenant = await make_tenant()
    user = await new_user(sessions, role=Role.agent, tenant_id=tenant.id)
    attacker_ip, other_ip = "198.51.100.7", "198.51.100.8"
    async with _client(proxied_app, PROXY, **{"X-Forwarded-For": attacker_ip}) as attacker:
        for _ in range(20):  # 20 failures on 20 unknown e-mails: the attacker's address is past its limit
            await attacker.post("/login", data=_login(f"y-{uuid.uuid4().hex[:6]}@example.com", "wrong one!!"))
        # from that address, an account with attempts is refused after two
        for expected in (401, 401, 429):
            answer = await attacker.post("/login", data=_login(user.email, "still wrong!!"))
            assert answer.status_code == expected
    # the count of the attacker's address is not the other browser's: its user logs in after a typo
    # (their count was reset by nobody; it is the e-mail limit of 5 that applies from a clean address)
    async with _client(proxied_app, PROXY, **{"X-Forwarded-For": other_ip}) as person:
        other = await new_user(sessions, role=Role.agent, tenant_id=tenant.id)
        for _ in range(3):
            assert (await person.post("/login", data=_login(other.email, "a typo here"))).status_code == 401
        ok = await person.post("/login", data=_login(other.email, PASSWORD))
    assert ok.status_code == 303


async def test_an_untrusted_peers_forwarded_header_is_ignored(proxied_app, sessions, make_tenant):
    tenant = await make_tenant()
    user = await new_user(sessions, role=Role.agent, tenant_id=tenant.id)
    peer = f"203.0.113.{uuid.uuid4().int % 250 + 1}"
    # a direct client claiming a fresh address on every request is still counted at its own address
    for _ in range(20):
        spoofed = {"X-Forwarded-For": f"192.0.2.{uuid.uuid4().int % 250 + 1}"}
        async with _client(proxied_app, peer, **spoofed) as client:
            await client.post("/login", data=_login(f"z-{uuid.uuid4().hex[:6]}@example.com", "wrong one!!"))
    async with _client(proxied_app, peer, **{"X-Forwarded-For": "192.0.2.250"}) as client:
        answers = [
            (await client.post("/login", data=_login(user.email, "wrong again!"))).status_code
            for _ in range(3)
        ]
    assert answers == [401, 401, 429]  # the peer's own address is past its limit; the header changed nothing


async def test_the_login_form_refuses_a_cross_site_post(console_client, sessions, make_tenant):
    tenant = await make_tenant()
    user = await new_user(sessions, role=Role.agent, tenant_id=tenant.id)
    cross_site = (
        {"Origin": "https://evil.example"},
        {"Origin": "null"},
        {"Origin": "http://console.test.evil.example"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site", "Origin": "http://console.test"},
    )
    for headers in cross_site:
        async with console_client(**headers) as client:
            refused = await client.post("/login", data=_login(user.email, PASSWORD))
            assert refused.status_code == 403, headers
            assert "another web site" in refused.text and "sb_console" not in refused.headers.get(
                "set-cookie", ""
            )
            assert (await client.get(f"/t/{tenant.slug}/inbox")).status_code == 303  # not logged in


async def test_the_login_form_accepts_its_own_pages_post(console_client, sessions, make_tenant):
    tenant = await make_tenant()
    user = await new_user(sessions, role=Role.agent, tenant_id=tenant.id)
    same_site = (
        {"Origin": "http://console.test", "Sec-Fetch-Site": "same-origin"},
        {"Origin": "http://console.test:80"},
        {"Sec-Fetch-Site": "none"},
        {},
    )
    for headers in same_site:
        async with console_client(**headers) as client:
            ok = await client.post("/login", data=_login(user.email, PASSWORD))
            assert ok.status_code == 303, (headers, ok.text[:300])
            assert (await client.get(f"/t/{tenant.slug}/inbox")).status_code == 200


async def test_the_shipped_compose_setting_trusts_caddy_on_the_compose_network(
    make_settings: Callable[..., Any], sessions, make_tenant
):
    compose = yaml.safe_load((ROOT / "infra" / "docker-compose.yml").read_text())
    value = compose["services"]["console"]["environment"]["FORWARDED_ALLOW_IPS"]
    default = value.split(":-", 1)[1].rstrip("}")  # ${CONSOLE_TRUSTED_PROXIES:-...}
    terraform = (ROOT / "infra" / "terraform" / "ecs.tf").read_text()
    assert 'FORWARDED_ALLOW_IPS = join(",", aws_subnet.public[*].cidr_block)' in terraform
    caddy = (ROOT / "infra" / "Caddyfile").read_text()
    assert "header_up X-Forwarded-For {remote_host}" in caddy
    app = create_app(make_settings(forwarded_allow_ips=default))
    tenant = await make_tenant()
    user = await new_user(sessions, role=Role.agent, tenant_id=tenant.id)
    caddy_ip = "172.19.0.4"  # an address Docker gives a compose network
    attacker = f"198.51.100.{uuid.uuid4().int % 250 + 1}"
    person = f"192.0.2.{uuid.uuid4().int % 250 + 1}"
    async with app.router.lifespan_context(app):
        async with _client(app, caddy_ip, **{"X-Forwarded-For": attacker}) as client:
            for _ in range(21):  # the attacker's own address goes past its limit
                await client.post(
                    "/login", data=_login(f"q-{uuid.uuid4().hex[:6]}@example.com", "wrong!!!!!")
                )
            flagged = [
                (await client.post("/login", data=_login(user.email, "wrong!!!!!"))).status_code
                for _ in range(3)
            ]
        async with _client(app, caddy_ip, **{"X-Forwarded-For": person}) as client:
            other = await new_user(sessions, role=Role.agent, tenant_id=tenant.id)
            clean = [
                (await client.post("/login", data=_login(other.email, "wrong!!!!!"))).status_code
                for _ in range(3)
            ]
            ok = await client.post("/login", data=_login(other.email, PASSWORD))
    assert flagged == [401, 401, 429]  # counted at the attacker's address
    assert clean == [401, 401, 401] and ok.status_code == 303  # another browser behind Caddy is not
