"""The outbound-address policy: every spelling of a non-public address is refused, the connection goes to
the address that was checked, redirects are checked again, and no tenant-set or provider-handed URL
reaches a listener on loopback when the operator has not allowed loopback."""

from __future__ import annotations

import asyncio
import ipaddress
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request, Response
from hypothesis import given
from hypothesis import strategies as st
from obstore.store import MemoryStore
from sqlmodel import select
from switchboard.channels.whatsapp.send import GraphClient, GraphSendError
from switchboard.conversations import start_conversation
from switchboard.crypto import CredentialCipher
from switchboard.db.models import Customer, Tenant, WebhookDelivery, WebhookEndpoint
from switchboard.egress import EgressPolicy, EgressRefused, address_refusal, guarded_client
from switchboard.events.delivery import run_event_delivery
from switchboard.llm.config import DeploymentSettings, LLMSettings
from switchboard.llm.router import ModelCallFailed, ModelGateway
from switchboard.media.store import MediaCopyFailed, MediaStore
from switchboard.tenant_settings import set_section

from services.orchestrator.main import create_app
from tests.utils.servers import serve_app

# --- address spellings -------------------------------------------------------------------------

NON_PUBLIC_V4 = [
    "127.0.0.0/8",
    "10.0.0.0/8",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "169.254.0.0/16",
    "100.64.0.0/10",
    "0.0.0.0/8",
    "224.0.0.0/4",
    "240.0.0.0/4",
    "192.0.0.0/24",
    "198.18.0.0/15",
    "192.0.2.0/24",
    "198.51.100.0/24",
    "203.0.113.0/24",
    "192.88.99.0/24",
    "255.255.255.255/32",
]
"""IANA's IPv4 special-purpose registry (its entries not globally reachable) and deprecated ranges."""
NON_PUBLIC_V6 = [
    "::1/128",
    "fe80::/10",
    "fc00::/7",
    "ff00::/8",
    "::/128",
    "fec0::/10",
    "3fff::/20",
    "5f00::/16",
    "100::/64",
    "100:0:0:1::/64",
    "2001::/23",
    "2001:db8::/32",
    "2001:2::/48",
    "64:ff9b:1::/48",
]
"""IANA's IPv6 special-purpose registry (its entries not globally reachable), deprecated site-local
``fec0::/10`` and documentation ``3fff::/20`` included."""


def _in(network: str) -> st.SearchStrategy[Any]:
    net = ipaddress.ip_network(network)
    return st.integers(int(net.network_address), int(net.broadcast_address)).map(
        lambda n: ipaddress.ip_address(n) if net.version == 6 else ipaddress.IPv4Address(n)
    )


non_public_v4 = st.one_of(*(_in(n) for n in NON_PUBLIC_V4))
non_public_v6 = st.one_of(*(_in(n) for n in NON_PUBLIC_V6))


def _v4_spellings(ip: ipaddress.IPv4Address) -> list[str]:
    """Every host spelling of ``ip`` a resolver or a URL parser accepts."""
    n, (a, b, c, d) = int(ip), ip.packed
    return [
        str(ip),
        str(n),
        hex(n),
        f"0{n:o}",
        f"{a}.{(b << 16) | (c << 8) | d}",
        f"{a}.{b}.{(c << 8) | d}",
        f"0x{a:x}.0x{b:x}.0x{c:x}.0x{d:x}",
        f"0{a:o}.0{b:o}.0{c:o}.0{d:o}",
        f"{ip}.",
        f"[::ffff:{ip}]",
        f"[::ffff:{(a << 8) | b:x}:{(c << 8) | d:x}]",
        f"[::{ip}]",
        f"[64:ff9b::{ip}]",
        f"[2002:{(a << 8) | b:x}:{(c << 8) | d:x}::1]",
    ]


def _url(scheme: str, host: str, port: int | None, userinfo: str) -> str:
    return f"{scheme}://{userinfo}{host}{f':{port}' if port else ''}/v1"


async def _numeric_only(host: str, port: int) -> list[str]:
    """A resolver that knows no names (numeric spellings as the system reads them)."""
    import socket

    infos = await asyncio.get_running_loop().getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST
    )
    return [str(i[4][0]) for i in infos]


schemes = st.sampled_from(["https", "http"])
ports = st.none() | st.integers(1, 65535)
userinfos = st.sampled_from(["", "public.example.com@", "user:pw@"])


@given(ip=non_public_v4, pick=st.integers(0, 100), scheme=schemes, port=ports, userinfo=userinfos)
def test_every_spelling_of_a_non_public_ipv4_address_is_refused(ip, pick, scheme, port, userinfo) -> None:  # type: ignore[no-untyped-def]
    spellings = _v4_spellings(ip)
    url = _url(scheme, spellings[pick % len(spellings)], port, userinfo)
    with pytest.raises(EgressRefused):
        asyncio.run(EgressPolicy(resolver=_numeric_only).resolve(url))


@given(ip=non_public_v6, scheme=schemes, zone=st.sampled_from(["", "%25eth0", "%251"]), port=ports)
def test_every_non_public_ipv6_address_is_refused_with_or_without_a_zone(ip, scheme, zone, port) -> None:  # type: ignore[no-untyped-def]
    url = _url(scheme, f"[{ip}{zone}]", port, "")
    with pytest.raises(EgressRefused):
        asyncio.run(EgressPolicy(resolver=_numeric_only).resolve(url))


@given(ip=non_public_v4 | non_public_v6)
def test_every_special_purpose_address_is_refused_by_the_address_rule(ip) -> None:  # type: ignore[no-untyped-def]
    assert address_refusal(ip) is not None


@given(ip=non_public_v4, public=st.integers(0x01000000, 0xDFFFFFFF).map(ipaddress.IPv4Address))
def test_a_name_with_any_non_public_address_is_refused(ip, public) -> None:  # type: ignore[no-untyped-def]
    async def resolver(host: str, port: int) -> list[str]:
        return [str(public), str(ip)]

    with pytest.raises(EgressRefused, match=r"policy refused shop\.example\.com: it resolves to") as refused:
        asyncio.run(EgressPolicy(resolver=resolver).resolve("https://shop.example.com/v1"))
    assert str(ip) not in str(refused.value)  # the tenant never learns the internal address


@given(ip=st.integers(0x01000000, 0xDFFFFFFF).map(ipaddress.IPv4Address))
def test_public_https_addresses_pass_and_are_connected_to_as_checked(ip) -> None:  # type: ignore[no-untyped-def]
    policy = EgressPolicy(resolver=_numeric_only)
    if not ip.is_global:
        with pytest.raises(EgressRefused):
            asyncio.run(policy.resolve(f"https://{ip}/v1"))
        return
    target, address = asyncio.run(policy.resolve(f"https://{ip}/v1"))
    assert (target.host, address) == (str(ip), str(ip))
    with pytest.raises(EgressRefused, match="https://"):
        asyncio.run(policy.resolve(f"http://{ip}/v1"))


@pytest.mark.parametrize(
    "url",
    [
        "https://localhost/v1",
        "https://localhost./v1",
        "https://api.localhost/v1",
        "https://metadata.internal/",
        "https://printer.local/",
        "ftp://example.com/",
        "https:///v1",
        "https://public.example.com@127.0.0.1/v1",
    ],
)
def test_local_names_other_schemes_and_userinfo_are_refused(url: str) -> None:
    with pytest.raises(EgressRefused):
        asyncio.run(EgressPolicy(resolver=_numeric_only).resolve(url))


def test_the_operator_allowance_opens_loopback_only() -> None:
    allowed = EgressPolicy(allow_loopback=True, resolver=_numeric_only)
    assert asyncio.run(allowed.check("http://127.0.0.1:9/v1")) == "http://127.0.0.1:9/v1"
    assert asyncio.run(allowed.resolve("http://[::1]:9/v1"))[1] == "::1"
    for url in ("http://10.0.0.1/", "https://169.254.169.254/", "https://100.64.0.1/", "http://[fe80::1]/"):
        with pytest.raises(EgressRefused):
            asyncio.run(allowed.resolve(url))


def test_the_operators_model_networks_open_only_those_networks_and_only_for_models(make_settings) -> None:
    settings = make_settings(egress_allow_loopback=False, egress_model_networks="10.0.5.0/24, fd00:5::/64")
    models = EgressPolicy.for_models(settings)
    assert asyncio.run(models.check("http://10.0.5.7:8000/v1")) == "http://10.0.5.7:8000/v1"
    assert asyncio.run(models.resolve("http://[fd00:5::7]:8000/v1"))[1] == "fd00:5::7"

    async def gpu_box(host: str, port: int) -> list[str]:
        return ["10.0.5.9"]

    named = EgressPolicy.from_settings(settings, resolver=gpu_box, networks=settings.model_networks)
    assert asyncio.run(named.resolve("http://gpu.lan.example:8000/v1"))[1] == "10.0.5.9"
    for url in ("http://10.0.6.1/v1", "https://169.254.169.254/", "http://127.0.0.1:8000/v1"):
        with pytest.raises(EgressRefused):
            asyncio.run(models.resolve(url))
    for other in (EgressPolicy.from_settings(settings), EgressPolicy.for_channels(settings)):
        with pytest.raises(EgressRefused):  # webhooks and media links never reach them
            asyncio.run(other.resolve("https://10.0.5.7/hook"))


def test_a_model_network_that_is_not_a_network_is_refused_at_start(make_settings) -> None:
    with pytest.raises(Exception, match="not a network"):
        make_settings(egress_model_networks="10.0.5.0/24,gpu-box")


# --- a recording listener on loopback -----------------------------------------------------------


@dataclass
class Listener:
    """An internal service: records every request it gets; ``/redirect`` sends the client elsewhere."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.api_route("/{path:path}", methods=["GET", "POST", "PUT"])
        async def anything(path: str, request: Request) -> Response:
            if path == "healthz":  # serve_app waits for it
                return Response(content=b"ok")
            self.requests.append(
                {"path": path, "host": request.headers.get("host"), "body": await request.body()}
            )
            if path == "redirect":
                return Response(status_code=302, headers={"Location": request.query_params["to"]})
            return Response(content=b'{"secret": "internal"}', media_type="application/json")

        return app


@contextmanager
def listening() -> Iterator[Listener]:
    listener = Listener()
    with serve_app(listener.app()) as url:
        listener.url = url
        yield listener


@pytest.fixture
def listener() -> Iterator[Listener]:
    with listening() as heard:
        yield heard


@pytest.fixture
def strict_settings(make_settings):  # type: ignore[no-untyped-def]
    """This deployment's settings without the loopback allowance (production)."""
    return make_settings(egress_allow_loopback=False)


@pytest.fixture
async def strict_api(strict_settings) -> AsyncIterator[httpx.AsyncClient]:  # type: ignore[no-untyped-def]
    app = create_app(strict_settings)
    async with app.router.lifespan_context(app):
        headers = {"Authorization": f"Bearer {strict_settings.secret('admin_token')}"}
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://test", headers=headers
        ) as client:
            yield client


async def _store_deployment(sessions, tenant_id: uuid.UUID, api_base: str) -> None:  # type: ignore[no-untyped-def]
    """As if saved while the address was still allowed (or its name resolved elsewhere)."""
    async with sessions() as session, session.begin():
        tenant = await session.get(Tenant, tenant_id)
        llm = {
            "deployments": [
                {"id": "mine", "provider": "openai_compatible", "model": "m", "api_base": api_base}
            ]
        }
        tenant.settings_extensions = {**(tenant.settings_extensions or {}), "llm": llm}
        session.add(tenant)


# --- the pinned transport ---------------------------------------------------------------------


async def test_the_connection_goes_to_the_checked_address_with_the_host_header_kept(listener) -> None:  # type: ignore[no-untyped-def]
    port = int(listener.url.rsplit(":", 1)[1])
    asked: list[str] = []

    async def resolver(host: str, port_: int) -> list[str]:
        asked.append(host)
        return ["127.0.0.1"]

    # the system resolver knows no ``.test`` name: the request arrives only through the pinned address
    async with guarded_client(EgressPolicy(allow_loopback=True, resolver=resolver)) as client:
        answer = await client.get(f"http://shop.rebind.test:{port}/pinned")
    assert answer.status_code == 200 and asked == ["shop.rebind.test"]
    assert listener.requests == [{"path": "pinned", "host": f"shop.rebind.test:{port}", "body": b""}]


async def test_a_name_that_rebinds_to_loopback_after_the_check_is_refused_at_the_connection(listener) -> None:  # type: ignore[no-untyped-def]
    port = int(listener.url.rsplit(":", 1)[1])
    answers = iter([["93.184.215.14"], ["127.0.0.1"]])

    async def rebinding(host: str, port_: int) -> list[str]:
        return next(answers)

    policy = EgressPolicy(resolver=rebinding)
    url = f"https://hooks.rebind.example:{port}/hook"
    assert await policy.check(url) == url  # saved: the name answered a public address then
    async with guarded_client(policy) as client:
        with pytest.raises(EgressRefused, match="resolves to a loopback address"):
            await client.post(url, content=b"{}")
    assert listener.requests == []


async def test_a_redirect_to_an_internal_address_is_refused(listener) -> None:  # type: ignore[no-untyped-def]
    policy = EgressPolicy(allow_loopback=True)
    async with guarded_client(policy, follow_redirects=True) as client:
        for target in (
            "http://169.254.169.254/latest/meta-data/",
            "http://10.0.0.7:6379/",
            "http://[::ffff:a9fe:a9fe]/",
        ):
            with pytest.raises(EgressRefused, match="policy refused"):
                await client.get(f"{listener.url}/redirect", params={"to": target})
    assert [r["path"] for r in listener.requests] == ["redirect"] * 3


async def test_a_media_copy_redirected_to_an_internal_address_is_refused(listener) -> None:  # type: ignore[no-untyped-def]
    store = MediaStore(MemoryStore(), max_bytes=1_000_000)
    async with httpx.AsyncClient() as http:
        with pytest.raises(MediaCopyFailed) as failed:
            await store.copy_url(
                http,
                f"{listener.url}/redirect?to=http://169.254.169.254/latest/",
                namespace="instagram/t",
                egress=EgressPolicy(allow_loopback=True),
            )
    assert failed.value.reason == "refused" and not failed.value.is_transient


# --- tenant-set URLs never reach loopback -------------------------------------------------------


async def test_test_this_deployment_on_an_internal_address_reaches_nothing_through_the_admin_api(
    strict_api, strict_settings, make_tenant, sessions, listener
):  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    await _store_deployment(sessions, tenant.id, listener.url + "/v1")
    answer = await strict_api.post(f"/v1/admin/tenants/{tenant.slug}/settings/deployments/mine/test")
    assert answer.status_code == 200, answer.text
    result = answer.json()
    assert result["ok"] is False
    assert (
        result["error"] == "the address policy refused 127.0.0.1: it is a loopback address, not a public one"
    )
    assert listener.requests == []

    # and it is not saved either: the settings API refuses it at its path
    refused = await strict_api.patch(
        f"/v1/admin/tenants/{tenant.slug}/settings",
        json={
            "llm": {
                "deployments": [
                    {
                        "id": "new",
                        "provider": "ollama",
                        "model": "m",
                        "api_base": f"http://0x7f.1:{listener.url.rsplit(':', 1)[1]}",
                    }
                ]
            }
        },
    )
    assert refused.status_code == 422, refused.text
    assert "llm.deployments[new].api_base" in refused.text and "address policy refused" in refused.text
    metadata = await strict_api.patch(
        f"/v1/admin/tenants/{tenant.slug}/settings",
        json={
            "llm": {
                "deployments": [
                    {
                        "id": "md",
                        "provider": "openai_compatible",
                        "model": "m",
                        "api_base": "http://169.254.169.254/v1",
                    }
                ]
            }
        },
    )
    assert metadata.status_code == 422 and "link-local" in metadata.text
    # the operator's own services are trusted only for what they serve: not as a model base
    graph = await strict_api.patch(
        f"/v1/admin/tenants/{tenant.slug}/settings",
        json={
            "llm": {
                "deployments": [
                    {
                        "id": "wa",
                        "provider": "openai_compatible",
                        "model": "m",
                        "api_base": strict_settings.resolved_whatsapp_graph_base_url,
                    }
                ]
            }
        },
    )
    assert graph.status_code == 422 and "loopback" in graph.text
    assert listener.requests == []


@pytest.mark.parametrize("list_name", ["transcription", "vision"])
async def test_a_voice_or_picture_model_on_an_internal_address_is_not_saved(
    strict_api, make_tenant, list_name
):  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    for api_base, why in (
        ("http://169.254.169.254/v1", "link-local"),
        ("http://127.0.0.1:8000/v1", "loopback"),
    ):
        refused = await strict_api.patch(
            f"/v1/admin/tenants/{tenant.slug}/settings",
            json={
                "llm": {
                    list_name: [
                        {"id": "inside", "provider": "openai_compatible", "model": "m", "api_base": api_base}
                    ]
                }
            },
        )
        assert refused.status_code == 422, refused.text
        assert f"llm.{list_name}[inside].api_base" in refused.text and why in refused.text


@pytest.mark.parametrize(("provider", "path"), [("openai_compatible", "/v1"), ("ollama", "")])
async def test_the_model_gateway_checks_every_connection_of_a_tenant_deployment(
    strict_settings, listener, provider, path
) -> None:  # type: ignore[no-untyped-def]
    gateway = ModelGateway(
        settings=strict_settings, cipher=CredentialCipher(strict_settings.secret("encryption_key").encode())
    )
    llm = LLMSettings(
        deployments=[
            DeploymentSettings(id="mine", provider=provider, model="m", api_base=listener.url + path)
        ],
        num_retries=0,
    )
    router = gateway.router_for(uuid.uuid4(), llm)
    with pytest.raises(ModelCallFailed) as failed:
        await gateway.complete(router, [{"role": "user", "content": "hi"}], tools=None, llm=llm, trace_id="t")
    assert "address policy refused" in str(failed.value.failed_deployments)
    assert listener.requests == []


async def test_a_knowledge_search_with_an_internal_embedding_base_reaches_nothing(
    strict_api, make_tenant, sessions, strict_settings, listener
):  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    cipher = CredentialCipher(strict_settings.secret("encryption_key").encode())
    async with sessions() as session, session.begin():
        row = await session.get(Tenant, tenant.id)
        set_section(
            row,
            "knowledge",
            embedding_model="text-embedding-3-small",
            embedding_api_base=listener.url + "/v1",
            embedding_api_key_encrypted=cipher.encrypt({"api_key": "sk-tenant"}),
        )
        session.add(row)
    answer = await strict_api.get(
        f"/v1/admin/tenants/{tenant.slug}/knowledge/search", params={"q": "returns"}
    )
    assert answer.status_code == 503, answer.text
    assert "the address policy refused 127.0.0.1: it is a loopback address" in answer.text
    assert "secret" not in answer.text
    assert listener.requests == []
    refused = await strict_api.put(
        f"/v1/admin/tenants/{tenant.slug}/knowledge/embedding",
        json={"model": "text-embedding-3-small", "api_key": "sk-x", "api_base": "http://2130706433:8080/v1"},
    )
    assert refused.status_code == 422 and "address policy refused" in refused.text


async def test_an_event_webhook_stored_with_an_internal_address_is_never_sent(
    make_tenant, sessions, strict_settings, listener
):  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    cipher = CredentialCipher(strict_settings.secret("encryption_key").encode())
    async with sessions() as session, session.begin():
        endpoint = WebhookEndpoint(
            tenant_id=tenant.id,
            url=listener.url + "/hook",
            event_types=[],
            description="crm",
            secret_encrypted=cipher.encrypt({"secret": "whsec_x"}),
        )
        session.add(endpoint)
    async with sessions() as session, session.begin():
        customer = Customer(
            tenant_id=tenant.id, channel="whatsapp", external_user_id=f"u-{uuid.uuid4().hex[:8]}"
        )
        session.add(customer)
    async with sessions() as session, session.begin():
        await start_conversation(session, customer=customer, channel_account_id=None)  # conversation.created
    for _ in range(3):  # other tests' events may be sent first
        await run_event_delivery(sessions, strict_settings, cipher=cipher)
    async with sessions() as session:
        (delivery,) = (
            await session.exec(select(WebhookDelivery).where(WebhookDelivery.endpoint_id == endpoint.id))
        ).all()
    assert (
        delivery.last_error
        == "refused: the address policy refused 127.0.0.1: it is a loopback address, not a public one"
    )
    assert listener.requests == []


async def test_a_media_lookup_answering_an_internal_url_is_not_downloaded(listener) -> None:  # type: ignore[no-untyped-def]
    rogue = FastAPI()
    internal = listener.url + "/latest/meta-data/iam"

    @rogue.get("/v23.0/{media_id}")
    async def media(media_id: str) -> dict[str, Any]:
        return {"url": internal, "mime_type": "image/jpeg", "id": media_id, "file_size": 10}

    with serve_app(rogue) as graph_base:
        # the Graph root is the operator's; the link it hands back is the provider's and is checked
        graph = GraphClient(graph_base, "v23.0", egress=EgressPolicy())
        try:
            info = await graph.media_info(media_id="m1", token="t")
            assert info.url == internal
            with pytest.raises(
                GraphSendError, match="media link refused: the address policy refused 127.0.0.1"
            ):
                await graph.download(url=info.url, token="t")
        finally:
            await graph.aclose()
    assert listener.requests == []
