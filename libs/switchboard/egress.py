"""The outbound-address policy: where Switchboard may connect when a tenant or a provider chose the URL.

Every URL a tenant can set (model and embedding ``api_base``, event webhook endpoints) and every URL a
provider hands us (media download links from WhatsApp, Instagram or Gmail lookups) goes through this one
module, when it is saved and again at every connection:

- ``https://`` only, no credentials in the URL (``user:pass@``), a host that is a name or an address;
- the host is resolved (``getaddrinfo``) and every address it has must be public unicast: never
  loopback, private, link-local (cloud metadata at ``169.254.169.254`` / ``169.254.170.2``), CGNAT
  ``100.64.0.0/10``, multicast, unspecified, reserved or documentation ranges, nor those addresses in
  IPv4-mapped, IPv4-compatible, NAT64 (``64:ff9b::/96``), 6to4 or Teredo form. Any spelling resolves
  to the same address (``2130706433``, ``0177.0.0.1``, ``0x7f.1``, ``127.1``, ``[::1%eth0]``), so the
  decision is taken on the address, not on the text;
- the connection goes to exactly the address that was checked (:class:`EgressTransport` pins it and
  keeps the ``Host`` header and the TLS server name), so a name that answers differently the next time
  (DNS rebinding) cannot swap it; each redirect hop is a new request and is checked the same way.

The operator's own URLs are trusted where they serve (:attr:`EgressPolicy.trusted_origins`):
``MODEL_SERVER_URL`` for model calls (:meth:`EgressPolicy.for_models`), the channel API roots and
sandboxes for media links (:meth:`EgressPolicy.for_channels`); ``TRANSCRIPTION_BASE_URL`` and
``VISION_BASE_URL`` are called directly, never through this policy.
``EGRESS_ALLOW_LOOPBACK`` (local sandboxes and tests) also allows loopback addresses, over ``http://``
too; ``EGRESS_MODEL_NETWORKS`` allows the operator's own private networks for model and embedding calls
only (:meth:`EgressPolicy.for_models`), over ``http://`` too.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import weakref
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx

from switchboard.errors import SwitchboardError
from switchboard.observability import get_logger

if TYPE_CHECKING:
    from switchboard.settings import Settings

__all__ = [
    "EgressPolicy",
    "EgressRefused",
    "EgressTransport",
    "Resolver",
    "address_refusal",
    "egress_scope",
    "guarded_client",
    "install_in_litellm",
    "parse_target",
]

log = get_logger(__name__)

Resolver = Callable[[str, int], Awaitable[list[str]]]
"""``(host, port) -> addresses``: how a host name becomes addresses (tests give their own)."""

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NOT_GLOBAL = tuple(
    ipaddress.ip_network(net)
    for net in (
        "192.0.0.0/24",  # IETF protocol assignments (192.0.0.8 and others)
        "192.88.99.0/24",  # 6to4 relay anycast, deprecated (RFC 7526)
        "fec0::/10",  # site-local, deprecated (RFC 3879)
        "3fff::/20",  # documentation (RFC 9637)
        "5f00::/16",  # segment-routing SIDs (RFC 9602)
        "100:0:0:1::/64",  # dummy prefix (RFC 9780)
        "2001::/23",  # IETF protocol assignments, Teredo 2001::/32 included
    )
)
"""Special-purpose ranges (IANA's IPv4 and IPv6 special-purpose address registries, and deprecated
ones) that Python's ``is_global`` still counts as global in some Python version (3.11 takes
``fec0::1`` and ``3fff::1`` for global); none is a provider's or a webhook receiver's address."""
_BLOCKED_NAMES = (".localhost", ".local", ".internal", ".home.arpa")


class EgressRefused(SwitchboardError, ValueError):
    """The policy refused an outbound URL. ``str()`` says why in plain words, for the tenant: it names
    the host the tenant gave, never an address it resolved to or anything learnt by connecting."""


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 transition form carries (mapped, compatible, NAT64, 6to4), if any."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if any(ip in net for net in _NAT64) or (ip in _IPV4_COMPATIBLE and int(ip) > 1):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def _is_loopback(ip: IPAddress) -> bool:
    if isinstance(ip, ipaddress.IPv6Address):
        inner = _embedded_ipv4(ip)
        if inner is not None:
            return inner.is_loopback
    return ip.is_loopback


def address_refusal(ip: IPAddress, *, allow_loopback: bool = False) -> str | None:
    """Why ``ip`` may not be connected to (a short phrase), or ``None`` when it is public unicast.

    IPv6 transition forms are judged by the IPv4 address they carry (and must be public themselves).
    """
    if allow_loopback and _is_loopback(ip):
        return None
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id:
            ip = ipaddress.IPv6Address(str(ip).split("%", 1)[0])
        inner = _embedded_ipv4(ip)
        if inner is not None:
            reason = address_refusal(inner)
            if reason is not None:
                return reason
            if ip.ipv4_mapped is not None:
                return None  # ::ffff:a.b.c.d is the IPv4 address itself
        teredo = ip.teredo
        if teredo is not None and any(address_refusal(part) for part in teredo):
            return "a private address"
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_multicast:
        return "a multicast address"
    if ip.is_unspecified:
        return "an unspecified address"
    if isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT:
        return "a shared (carrier-grade NAT) address"
    if ip.is_private:
        return "a private address"
    if (
        ip.is_reserved
        or not ip.is_global
        or any(ip in net for net in _NOT_GLOBAL if ip.version == net.version)
    ):
        return "a reserved address"
    return None


def _literal(host: str) -> IPAddress | None:
    """``host`` as an address when it is one in any spelling (``127.1``, ``0x7f.1``, ``2130706433``,
    ``0177.0.0.1``, ``::1``, ``fe80::1%eth0``), else ``None`` (a name)."""
    bare = host.split("%", 1)[0]
    try:
        return ipaddress.ip_address(bare)
    except ValueError:
        pass
    if bare and all(c in "0123456789abcdefxABCDEFX." for c in bare) and bare[0].isdigit():
        try:  # the BSD forms getaddrinfo accepts too: decimal, octal, hex, short
            return ipaddress.IPv4Address(socket.inet_aton(bare.rstrip(".")))
        except OSError:
            return None
    return None


@dataclass(frozen=True)
class Target:
    """A checked URL's parts: ``scheme``, ``host`` (lower case, no brackets or trailing dot), ``port``."""

    scheme: str
    host: str
    port: int


def parse_target(url: str | httpx.URL) -> Target:
    """The scheme, host and port of ``url`` as the HTTP client will read them.

    Raises:
        EgressRefused: not an ``http(s)://`` URL with a host, or credentials in it.
    """
    try:
        parsed = url if isinstance(url, httpx.URL) else httpx.URL(url.strip())
    except (httpx.InvalidURL, TypeError, ValueError):
        raise EgressRefused("the address is not a valid URL") from None
    if parsed.scheme not in ("http", "https"):
        raise EgressRefused("the address must start with https://")
    if parsed.userinfo:
        raise EgressRefused("the address must not contain a user name or password (user@host)")
    host = parsed.host.lower()
    if host.endswith("."):
        host = host[:-1]
    if not host:
        raise EgressRefused("the address needs a host")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    return Target(parsed.scheme, host.replace("%25", "%"), port)


async def _system_resolver(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


@dataclass(frozen=True)
class EgressPolicy:
    """Where outbound connections to tenant- or provider-chosen URLs may go (the module docstring).

    Attributes:
        allow_loopback: also loopback addresses (and ``http://`` to them): local sandboxes and tests.
        allowed_networks: private networks the operator opened for this kind of call (and ``http://``
            to them): their own model servers.
        trusted_origins: ``(scheme, host, port)`` of URLs the operator set; connected to unchecked.
        resolver: host name to addresses (the system's ``getaddrinfo`` unless a test gives one).
    """

    allow_loopback: bool = False
    trusted_origins: frozenset[tuple[str, str, int]] = frozenset()
    resolver: Resolver = field(default=_system_resolver, compare=False)
    allowed_networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()

    def _opened(self, ip: IPAddress) -> bool:
        """Whether the operator opened ``ip``'s network for this kind of call."""
        if isinstance(ip, ipaddress.IPv6Address) and ip.scope_id:
            ip = ipaddress.IPv6Address(str(ip).split("%", 1)[0])
        return any(ip in net for net in self.allowed_networks if ip.version == net.version)

    def _refusal(self, ip: IPAddress) -> str | None:
        """:func:`address_refusal` with this policy's allowances."""
        if self._opened(ip):
            return None
        return address_refusal(ip, allow_loopback=self.allow_loopback)

    def _plain_http_ok(self, ip: IPAddress) -> bool:
        """Whether ``http://`` may go to ``ip``: an allowed loopback address or an opened network."""
        return (self.allow_loopback and _is_loopback(ip)) or self._opened(ip)

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        trust: Iterable[str | None] = (),
        resolver: Resolver | None = None,
        networks: Iterable[ipaddress.IPv4Network | ipaddress.IPv6Network] = (),
    ) -> EgressPolicy:
        """This process's policy: ``EGRESS_ALLOW_LOOPBACK`` (or its former name
        ``WEBHOOKS_ALLOW_LOOPBACK_HTTP``), ``trust``: the operator's own URLs for this kind of call
        (nothing for webhooks; :meth:`for_models`, :meth:`for_channels`), and ``networks`` opened for it."""
        return cls(
            allow_loopback=settings.egress_loopback_allowed,
            trusted_origins=frozenset(_origins(trust)),
            resolver=resolver or _system_resolver,
            allowed_networks=tuple(networks),
        )

    @classmethod
    def for_models(cls, settings: Settings) -> EgressPolicy:
        """For model and embedding calls: the operator's ``MODEL_SERVER_URL`` is trusted, and the
        networks of ``EGRESS_MODEL_NETWORKS`` (the operator's own model servers) are open."""
        return cls.from_settings(
            settings, trust=[settings.model_server_url], networks=settings.model_networks
        )

    @classmethod
    def for_channels(cls, settings: Settings) -> EgressPolicy:
        """For media links from channel providers: the operator's channel API roots and sandboxes
        (where the sandboxes' own media links point) are trusted."""
        return cls.from_settings(
            settings,
            trust=[
                settings.resolved_whatsapp_graph_base_url,
                settings.whatsapp_sandbox_url,
                settings.resolved_instagram_graph_base_url,
                settings.instagram_sandbox_url,
                settings.media_public_base_url,
            ],
        )

    def is_trusted(self, target: Target) -> bool:
        """Whether the operator set this origin (scheme, host and port all equal)."""
        return (target.scheme, target.host, target.port) in self.trusted_origins

    def check_syntax(self, url: str | httpx.URL) -> Target:
        """What can be said without resolving: the URL's form and a host given as an address.

        Raises:
            EgressRefused: see :func:`parse_target`; ``http://`` (except to an allowed loopback host);
                an address or a name (``localhost``, ``*.internal``) that is not public.
        """
        target = parse_target(url)
        if self.is_trusted(target):
            return target
        literal = _literal(target.host)
        loopback_name = target.host == "localhost" or target.host.endswith(".localhost")
        # a name may resolve to loopback or an opened network: :meth:`resolve` decides http for it
        if literal is None:
            local_ok = self.allow_loopback or bool(self.allowed_networks)
        else:
            local_ok = self._plain_http_ok(literal)
        if literal is not None:
            reason = self._refusal(literal)
            if reason is not None:
                raise EgressRefused(
                    f"the address policy refused {target.host}: it is {reason}, not a public one"
                )
        elif loopback_name and not self.allow_loopback:
            raise EgressRefused(f"the address policy refused {target.host}: it is not a public host")
        elif target.host.endswith(_BLOCKED_NAMES) and not loopback_name:
            raise EgressRefused(f"the address policy refused {target.host}: it is not a public host")
        if target.scheme != "https" and not local_ok:
            raise EgressRefused("the address must start with https://")
        return target

    async def resolve(self, url: str | httpx.URL) -> tuple[Target, str | None]:
        """Check ``url`` and resolve its host: ``(target, address to connect to)``.

        The address is ``None`` for a trusted origin (connected to as usual). Every address the name
        has must pass, so a name with one private address among public ones is refused too.

        Raises:
            EgressRefused: :meth:`check_syntax`, the name does not resolve, or an address is not public.
        """
        target = self.check_syntax(url)
        if self.is_trusted(target):
            return target, None
        literal = _literal(target.host)
        if literal is not None:
            mapped = literal.ipv4_mapped if isinstance(literal, ipaddress.IPv6Address) else None
            return target, str(mapped or literal)
        try:
            addresses = await self.resolver(target.host, target.port)
        except (OSError, UnicodeError):
            raise EgressRefused(
                f"the address policy refused {target.host}: the name does not resolve"
            ) from None
        if not addresses:
            raise EgressRefused(f"the address policy refused {target.host}: the name does not resolve")
        for address in addresses:
            try:
                ip = ipaddress.ip_address(address.split("%", 1)[0])
            except ValueError:
                raise EgressRefused(
                    f"the address policy refused {target.host}: the name does not resolve"
                ) from None
            reason = self._refusal(ip)
            if reason is not None:
                log.warning("egress_refused", host=target.host, address=address, reason=reason)
                raise EgressRefused(
                    f"the address policy refused {target.host}: it resolves to {reason}, not a public one"
                )
        if target.scheme != "https" and not all(
            self._plain_http_ok(ipaddress.ip_address(a.split("%", 1)[0])) for a in addresses
        ):
            raise EgressRefused("the address must start with https://")
        return target, addresses[0].split("%", 1)[0]

    async def check(self, url: str) -> str:
        """``url`` (stripped) when it passes :meth:`resolve`: the check when a URL is saved.

        Raises:
            EgressRefused: see :meth:`resolve`.
        """
        await self.resolve(url)
        return url.strip()


def _origins(urls: Iterable[str | None]) -> Iterable[tuple[str, str, int]]:
    for url in urls:
        if not url:
            continue
        try:
            target = parse_target(url)
        except EgressRefused:
            continue
        yield (target.scheme, target.host, target.port)


class EgressTransport(httpx.AsyncBaseTransport):
    """An httpx transport that checks every request with an :class:`EgressPolicy` and connects to the
    address it checked: the URL's host is replaced by that address, the ``Host`` header stays, and the
    TLS server name and certificate check use the host name (httpx's ``sni_hostname`` extension).

    One inner connection pool per event loop and host name (a pool is bound to its loop; one per name
    keeps a TLS connection made for one name from serving another name on the same address). A
    refused request raises :class:`EgressRefused` before any connection is made.
    """

    def __init__(self, policy: EgressPolicy, *, verify: Any = True) -> None:
        self.policy = policy
        self._verify = verify
        self._pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, httpx.AsyncHTTPTransport]]
        self._pools = weakref.WeakKeyDictionary()

    def _pool(self, key: str) -> httpx.AsyncHTTPTransport:
        pools = self._pools.setdefault(asyncio.get_running_loop(), {})
        pool = pools.get(key)
        if pool is None:
            pool = pools[key] = httpx.AsyncHTTPTransport(verify=self._verify, trust_env=False)
        return pool

    def _policy(self) -> EgressPolicy:
        return self.policy

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        target, address = await self._policy().resolve(request.url)
        if address is None:  # the operator's own service
            return await self._pool("").handle_async_request(request)
        request.url = request.url.copy_with(host=address)
        if target.scheme == "https":
            request.extensions = {**request.extensions, "sni_hostname": target.host}
        return await self._pool(target.host).handle_async_request(request)

    async def aclose(self) -> None:
        """Close this loop's pools (others close with their loop)."""
        try:
            pools = self._pools.pop(asyncio.get_running_loop(), {})
        except RuntimeError:
            return
        for pool in pools.values():
            await pool.aclose()


def guarded_client(policy: EgressPolicy, **kwargs: Any) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` whose every request (each redirect hop too) goes through ``policy``;
    ``kwargs`` as for ``httpx.AsyncClient`` (``timeout``, ``follow_redirects``; not ``transport``)."""
    return httpx.AsyncClient(transport=EgressTransport(policy), trust_env=False, **kwargs)


_SCOPE: ContextVar[EgressPolicy | None] = ContextVar("egress_policy", default=None)


@contextmanager
def egress_scope(policy: EgressPolicy) -> Iterator[None]:
    """Within this block (and the tasks it starts), LiteLLM's connections follow ``policy``
    (:func:`install_in_litellm`); the model gateway opens one around each provider call."""
    token = _SCOPE.set(policy)
    try:
        yield
    finally:
        _SCOPE.reset(token)


class _ScopedTransport(EgressTransport):
    """:class:`EgressTransport` whose policy is the caller's :func:`egress_scope`, or public
    addresses only when there is none."""

    def __init__(self) -> None:
        super().__init__(EgressPolicy())

    def _policy(self) -> EgressPolicy:
        return _SCOPE.get() or self.policy


_LITELLM_TRANSPORT: _ScopedTransport | None = None


def install_in_litellm(litellm: Any) -> None:
    """Route every async connection LiteLLM makes (chat, embeddings, any provider: its OpenAI SDK
    clients and its own HTTP handler both take their transport from
    ``AsyncHTTPHandler.create_async_transport``) through one :class:`EgressTransport` that follows the
    :func:`egress_scope` of the call. Idempotent."""
    global _LITELLM_TRANSPORT
    from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler

    if _LITELLM_TRANSPORT is None:
        _LITELLM_TRANSPORT = _ScopedTransport()
    transport = _LITELLM_TRANSPORT

    def create_async_transport(*args: Any, **kwargs: Any) -> httpx.AsyncBaseTransport:
        return transport

    # LiteLLM has no hook for this: its factories are replaced (with a looser signature than theirs).
    AsyncHTTPHandler.create_async_transport = staticmethod(create_async_transport)  # type: ignore[assignment]
    AsyncHTTPHandler._create_async_transport = staticmethod(create_async_transport)  # type: ignore[assignment]
    litellm.aclient_session = None  # a shared session would bypass the transport
