"""The one interface every channel implements, and the registry the channel-neutral core looks them up in.

A message's path (docs/concepts.md#the-message-path): a channel service verifies and normalizes a webhook into
:class:`~switchboard.contracts.InboundMessage`\\ s and stores them (``channels/<name>/``); the inbound job
(:mod:`switchboard.inbound`) runs the same ordered steps for every channel; replies, notices and relays
are written by one outbox writer and sent by one delivery loop (:mod:`switchboard.outbox`), which calls
the channel's :meth:`Channel.send`. Everything channel-specific the core needs is on :class:`Channel`:

* :attr:`Channel.capabilities`: text and caption limits (in the unit the provider counts), the
  customer-service window and what may be sent outside it, whether inbound text is untrusted,
  whether read receipts and a correlation id the provider echoes back exist;
* :meth:`Channel.send`: one :class:`OutboundPart` → the provider's message id, or a :class:`SendError`
  classified as transient, permanent, throttled or window-closed;
* :meth:`Channel.mark_read`, :meth:`Channel.fetch_media`: the inbound side's provider calls;
* hooks the inbound job calls for behaviour only one channel has (:meth:`Channel.on_record_only`,
  :meth:`Channel.acted_buttons`).

Everything else the core knows about a channel is declared on its class too: :attr:`Channel.label`
(the console and notices), :attr:`Channel.business_app` (the escalation reason of an echo),
:attr:`Channel.reply_identity_kinds` (whom a reply is addressed to), :attr:`Channel.account_id_label`,
:attr:`Channel.chart_colour`, and optionally ``show_address`` (how people see a customer's address,
:func:`shown_address`), ``address_of`` (a customer identity as the channel's send address,
:func:`channel_address`) and ``copy_media`` (``(account, ref, *, kind) -> StoredMedia``, raising
``MediaCopyFailed``: how an ``expiring`` media handle that needs the channel's own lookup, a WhatsApp
media id, is copied into media storage by :mod:`switchboard.media.jobs`); the registry answers with :func:`channel_class` and the ``channel_*``
functions below, so no channel name is listed anywhere else.

Channels register their class with :func:`register_channel` when their ``channel`` module is imported;
:data:`BUILTIN_CHANNELS` names the built-in packages (``switchboard.channels.<name>``, whose
``settings`` and ``channel`` modules are imported on first use of the registry), and the worker builds
one instance per process with :func:`build_channels`. A new channel is its own package plus one entry
in :data:`BUILTIN_CHANNELS`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import regex

from switchboard.errors import SwitchboardError

if TYPE_CHECKING:
    import httpx
    from sqlalchemy.ext.asyncio import async_sessionmaker
    from sqlmodel.ext.asyncio.session import AsyncSession

    from switchboard.crypto import CredentialCipher
    from switchboard.db.models import ChannelAccount, Message
    from switchboard.settings import Settings

__all__ = [
    "Capabilities",
    "Channel",
    "ChannelDeps",
    "OutboundPart",
    "SendError",
    "SendErrorKind",
    "BUILTIN_CHANNELS",
    "build_channels",
    "TextUnit",
    "business_app_of",
    "channel_capabilities",
    "channel_class",
    "channel_label",
    "channel_names",
    "channel_renderer",
    "shown_address",
    "channel_address",
    "reply_identity_kinds",
    "register_channel",
    "unregister_channel",
    "graphemes",
    "split_text",
    "text_length",
    "within_window",
]


class SendErrorKind(StrEnum):
    """What the delivery loop does with a failed send."""

    transient = "transient"  # network, 5xx, provider hiccup: try again later with back-off
    permanent = "permanent"  # refused for good (bad recipient, policy): fail this and the later parts
    throttled = "throttled"  # the account's throughput limit: hold every send of the account for a while
    window_closed = "window_closed"  # outside the customer-service window: needs a template or a human


class SendError(SwitchboardError):
    """A provider refused or could not take one send.

    Attributes:
        kind: the :class:`SendErrorKind` the delivery loop acts on.
        code: the provider's error code as text (Meta's ``error.code``), or ``None``.
        http_status: HTTP status of the provider's answer, ``None`` for network errors.
        retry_after_s: how long the provider asked us to wait (``Retry-After``), when it said.
    """

    def __init__(
        self,
        message: str,
        *,
        kind: SendErrorKind,
        code: str | None = None,
        http_status: int | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        self.kind = kind
        self.code = code
        self.http_status = http_status
        self.retry_after_s = retry_after_s
        super().__init__(message)


TextUnit = Literal["chars", "utf16", "bytes"]
"""How a provider counts a text limit: code points (WhatsApp), UTF-16 code units (Meta Messenger /
Instagram), or UTF-8 bytes (e-mail headers)."""


@dataclass(frozen=True)
class Capabilities:
    """What a channel can carry and when; every number's source is on the channel's own definition."""

    text_limit: int
    """Longest text of one message, counted in :attr:`text_unit`."""
    text_unit: TextUnit = "chars"
    caption_limit: int = 1024
    """Longest media caption, in :attr:`text_unit`."""
    service_window: timedelta | None = None
    """Free-form messages may be sent this long after the customer's last message (``None``: always)."""
    outside_window: frozenset[str] = frozenset()
    """:attr:`OutboundPart.type`\\ s allowed outside the window (WhatsApp: ``template``)."""
    human_agent_window: timedelta | None = None
    """A person's reply (outbox purpose ``human_reply``, never the AI's) may still go out this long
    after the customer's last message, sent with :attr:`human_agent_tag` (Instagram: 7 days,
    ``HUMAN_AGENT``); ``None``: no such extension."""
    human_agent_tag: str | None = None
    untrusted_inbound: bool = False
    """Inbound text is external content (an e-mail): the agent gets read-only tools on such turns."""
    read_receipts: bool = False
    """The channel can show the customer that we read their message (:meth:`Channel.mark_read`)."""
    correlation_echo: bool = False
    """The provider echoes a correlation id of ours back on status callbacks (WhatsApp
    ``biz_opaque_callback_data``), so a send whose answer was lost can be reconciled."""
    window_error_codes: frozenset[str] = frozenset()
    """``outbox.error_code``\\ s of a send the provider refused as outside the window (WhatsApp
    ``131047``); like our own ``window_closed`` refusal, such a failure is not offered for retry."""
    reply_cap: bool = False
    """Automatic replies per conversation are capped (:meth:`Channel.auto_reply_cap`; Gmail, so two
    robots never answer each other for long)."""


PartType = Literal["text", "media", "template", "interactive"]


@dataclass(frozen=True)
class OutboundPart:
    """One message to send, as stored in ``outbox.payload`` (see :meth:`to_payload`).

    ``media`` items are ``{ref, kind?, mime?, caption?, filename?}`` (``ref``: a provider media handle);
    ``template`` is ``{name, language}``; ``interactive`` is the channel's own interactive body.
    """

    type: PartType = "text"
    text: str = ""
    media: tuple[dict[str, Any], ...] = ()
    template: dict[str, Any] | None = None
    interactive: dict[str, Any] | None = None
    tag: str | None = None
    """A message tag the delivery loop decided on (:attr:`Capabilities.human_agent_tag`); never stored."""

    def to_payload(self) -> dict[str, Any]:
        """The JSON stored in ``outbox.payload`` (only the keys that are set)."""
        payload: dict[str, Any] = {"type": self.type}
        if self.text:
            payload["text"] = self.text
        if self.media:
            payload["media"] = [dict(m) for m in self.media]
        if self.template is not None:
            payload["template"] = dict(self.template)
        if self.interactive is not None:
            payload["interactive"] = dict(self.interactive)
        return payload

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> OutboundPart:
        """The part stored by :meth:`to_payload` (unknown keys such as ``audience`` are ignored)."""
        media = payload.get("media") or []
        return cls(
            type=payload.get("type") or "text",
            text=str(payload.get("text") or ""),
            media=tuple(dict(m) for m in media if isinstance(m, dict)),
            template=payload.get("template"),
            interactive=payload.get("interactive"),
        )


def text_length(text: str, unit: TextUnit) -> int:
    """Length of ``text`` counted the provider's way (a lone surrogate counts as one unit / 3 bytes)."""
    if unit == "utf16":
        return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)
    if unit == "bytes":
        return len(text.encode("utf-8", "surrogatepass"))
    return len(text)


_GRAPHEME = regex.compile(r"\X", regex.DOTALL)
"""One Unicode extended grapheme cluster (UAX #29, as implemented by the ``regex`` package)."""


def graphemes(text: str) -> list[str]:
    """``text`` as Unicode extended grapheme clusters (UAX #29): a cut between two of them never splits
    ``é``, a Devanagari conjunct, a Hangul syllable, a flag 🇪🇸 or a ZWJ family 👩‍👩‍👧."""
    clusters: list[str] = _GRAPHEME.findall(text)
    return clusters


_MIN_LIMIT: dict[str, int] = {"chars": 1, "utf16": 2, "bytes": 4}
"""The widest single code point in each unit: a smaller limit could not hold every text."""
_BREAKS = ("\n\n", "\n", ". ", "! ", "? ", "… ", "。", " ")


def split_text(text: str, limit: int, unit: TextUnit = "chars") -> list[str]:
    """Split ``text`` into parts of at most ``limit`` (counted in ``unit``, the provider's own unit), in
    order, never inside a grapheme cluster.

    Cuts at the last paragraph break that fits, else the last line break, else the last sentence end,
    else the last space; a single word longer than ``limit`` is cut hard between graphemes. A single
    grapheme longer than ``limit`` on its own (thousands of combining marks) is the one case cut inside
    a cluster, between code points, so no part is ever over the limit. Whitespace at a cut is dropped;
    nothing else is lost or reordered.

    Raises:
        ValueError: ``limit`` is smaller than one code point can be in ``unit`` (1 char, 2 UTF-16
            units, 4 bytes).
    """
    if limit < _MIN_LIMIT[unit]:
        raise ValueError(f"limit {limit} is too small for unit {unit!r}")
    parts: list[str] = []
    rest = text.strip()
    while rest and text_length(rest, unit) > limit:
        size, head_len = 0, 0
        for cluster in _GRAPHEME.finditer(rest):  # how many whole graphemes fit
            size += text_length(cluster.group(), unit)
            if size > limit:
                break
            head_len = cluster.end()
        if head_len == 0:  # one cluster alone is over the limit: take the code points that fit
            size = 0
            for ch in rest:
                size += text_length(ch, unit)
                if size > limit:
                    break
                head_len += 1
        window = rest[:head_len]
        cut = -1
        for marker in _BREAKS:
            pos = window.rfind(marker)
            if pos > 0:
                cut = pos + (len(marker) if marker in (". ", "! ", "? ", "… ", "。") else 0)
                break
        if cut <= 0:
            cut = head_len
        head = rest[:cut].rstrip()
        if head:
            parts.append(head)
        rest = rest[cut:].lstrip()
    if rest:
        parts.append(rest)
    return parts


def within_window(capabilities: Capabilities, last_inbound_at: datetime | None, now: datetime) -> bool:
    """Whether a free-form message may go out now (always, for channels without a service window)."""
    if capabilities.service_window is None:
        return True
    return last_inbound_at is not None and now - last_inbound_at < capabilities.service_window


@dataclass
class ChannelDeps:
    """What a channel instance may use, built once per worker process."""

    settings: Settings
    cipher: CredentialCipher
    http: httpx.AsyncClient
    """Shared client for transcription/vision endpoints."""
    extra: dict[str, Any] = field(default_factory=dict)
    sessions: async_sessionmaker[AsyncSession] | None = None
    """Database sessions, for channels that keep provider state of their own (Gmail: refreshed OAuth
    tokens, a reply's thread, our sent Message-IDs); ``None`` where the caller has none."""


@runtime_checkable
class Channel(Protocol):
    """One provider behind the channel-neutral core (see the module docstring)."""

    name: str
    """The registry key, ``conversations.channel`` and the tenant settings section (``whatsapp``)."""
    capabilities: Capabilities
    label: str
    """The channel as people name it (``WhatsApp``): console filters, notices, charts."""
    business_app: str
    """The app a business answers from outside Switchboard (``WhatsApp Business app``): the
    escalation reason when such a reply echoes back."""
    reply_identity_kinds: tuple[str, ...]
    """:class:`~switchboard.db.models.IdentityKind` values a reply is addressed to, best first."""
    account_id_label: str | None
    """How a connected account's id is named in console messages (``phone_number_id``); ``None`` for
    channels connected another way (Gmail: OAuth)."""
    chart_colour: str | None
    """The channel's colour in analytics charts (``#1f9d55``); ``None``: one from the fallback palette."""

    async def send(
        self, account: ChannelAccount, recipient: str, part: OutboundPart, *, correlation_id: str
    ) -> str:
        """Send one part from ``account`` to ``recipient``; returns the provider's message id.

        ``correlation_id`` is passed to the provider when it echoes one back on status callbacks.

        Raises:
            SendError: classified failure (the delivery loop retries, fails, or holds the account).
        """
        ...

    async def mark_read(
        self, account: ChannelAccount, external_id: str, *, sender: str | None = None
    ) -> None:
        """Show the customer their message ``external_id`` was read (no-op without read receipts).

        ``sender`` is the customer's address on the channel (Instagram marks a thread seen, not a message).

        Raises:
            SendError: the provider refused (the caller logs it; never fatal).
        """
        ...

    async def fetch_media(
        self, account: ChannelAccount, ref: str, *, max_bytes: int
    ) -> tuple[bytes, str | None]:
        """The bytes and MIME type behind a stored media handle (resolved right before download when
        the provider's links expire).

        Raises:
            switchboard.inbound.media.MediaUnavailable: with ``is_transient`` when a retry may work.
        """
        ...

    async def on_record_only(self, session: AsyncSession, row: Message, ctx: Any) -> None:
        """Channel-specific effects of a row that never wakes the agent (number changes...)."""
        ...

    async def customer_profile(self, account: ChannelAccount, sender: str) -> dict[str, str] | None:
        """The customer's ``{"name"?, "username"?}`` from the provider, for channels whose webhooks carry
        no name (Instagram ``GET /{igsid}``); ``None`` when the channel has no such lookup.

        Raises:
            SendError: the provider refused (the caller logs it; never fatal).
        """
        ...

    def acted_buttons(self, tenant_settings: Any) -> dict[str, str]:
        """Button payloads (lower-cased) this channel acts on without a model turn → action name
        (``opt_out``)."""
        ...

    def opt_out_reply(self, tenant_settings: Any) -> str:
        """The confirmation a customer gets after an opt-out button."""
        ...

    def auto_reply_cap(self, tenant_settings: Any) -> tuple[int, float] | None:
        """``(replies, window_s)``: at most this many automatic replies per conversation within
        ``window_s`` seconds (asked only when :attr:`Capabilities.reply_cap`); ``None``: no cap."""
        ...

    async def aclose(self) -> None:
        """Release provider clients."""
        ...


ChannelFactory = Callable[[ChannelDeps], Channel]
"""A registered channel class: called with :class:`ChannelDeps`, and read for its declared facts."""
_FACTORIES: dict[str, Any] = {}
BUILTIN_CHANNELS = ("whatsapp", "instagram", "gmail", "web")
"""The built-in channel packages (``switchboard.channels.<name>``): the one line a new channel adds.
Their ``settings`` modules register the tenant settings sections (imported with
:mod:`switchboard.channels`), their ``channel`` modules the classes (imported on first use of the
registry: no import-time cycles)."""
BUILTIN_CHANNEL_MODULES = tuple(f"switchboard.channels.{name}.channel" for name in BUILTIN_CHANNELS)
"""Modules that register the built-in channels."""


def _load_builtin() -> None:
    for module in BUILTIN_CHANNEL_MODULES:
        importlib.import_module(module)


def register_channel(name: str, factory: Any) -> None:
    """Make channel ``name`` available to :func:`build_channels` (called when its package is imported).

    ``factory`` is the channel class: called with :class:`ChannelDeps`, it builds the instance; its
    class attributes (:attr:`Channel.capabilities`, :attr:`Channel.label`...) are read without building.

    Raises:
        ValueError: another class is already registered under ``name``, or ``factory.name`` is not
            ``name``.
    """
    existing = _FACTORIES.get(name)
    if existing is not None and existing is not factory:
        raise ValueError(f"channel {name!r} is registered twice")
    if getattr(factory, "name", name) != name:
        raise ValueError(f"channel class {factory!r} is named {factory.name!r}, registered as {name!r}")
    _FACTORIES[name] = factory


def unregister_channel(name: str) -> None:
    """Forget channel ``name`` (a channel registered for a while, e.g. by a test); unknown: no-op."""
    _FACTORIES.pop(name, None)


def channel_names() -> list[str]:
    """Registered channel names in registration order: the built-ins as :data:`BUILTIN_CHANNELS` lists
    them (what the console shows first), then any registered later."""
    _load_builtin()
    return list(_FACTORIES)


def channel_class(name: str) -> Any | None:
    """The class registered as channel ``name`` (its declared facts, without building it); ``None``
    for an unknown channel."""
    _load_builtin()
    return _FACTORIES.get(name)


def channel_capabilities(name: str) -> Capabilities | None:
    """The :class:`Capabilities` channel ``name`` declares, without building it; ``None`` for an
    unknown channel."""
    cls = channel_class(name)
    return cls.capabilities if cls is not None else None


def channel_label(name: str) -> str:
    """The channel's :attr:`Channel.label` (``WhatsApp``); an unknown name as it is."""
    cls = channel_class(name)
    return str(cls.label) if cls is not None else name


def business_app_of(name: str) -> str:
    """The channel's :attr:`Channel.business_app` (``WhatsApp Business app``); for an unknown name,
    ``"<name> business app"``."""
    cls = channel_class(name)
    return str(cls.business_app) if cls is not None else f"{name} business app"


def reply_identity_kinds(name: str) -> tuple[str, ...]:
    """The channel's :attr:`Channel.reply_identity_kinds`, best first; ``()`` for an unknown name."""
    cls = channel_class(name)
    return tuple(cls.reply_identity_kinds) if cls is not None else ()


def channel_renderer(name: str) -> Callable[..., list[OutboundPart]] | None:
    """The ``render_structured(text, parts)`` function channel ``name`` declares on its class (buttons,
    lists, cards as its own interactive parts; see :mod:`switchboard.channels.render`), or ``None`` for a
    channel that shows them as text (or an unknown one)."""
    cls = channel_class(name)
    return getattr(cls, "render_structured", None) if cls is not None else None


def shown_address(name: str, address: str) -> str:
    """A customer's ``address`` on channel ``name`` as people may see it (an agent's notices): the
    ``show_address(address)`` function the channel declares on its class when its addresses are not for
    people's eyes (the website chat's visitor id is the visitor's only key), else ``address`` itself."""
    cls = channel_class(name)
    show = getattr(cls, "show_address", None) if cls is not None else None
    return str(show(address)) if show is not None else address


def channel_address(name: str, kind: str, value: str) -> str:
    """The address :meth:`Channel.send` takes for a customer identity ``(kind, value)`` on channel ``name``:
    the ``address_of(kind, value)`` function the channel declares on its class when an identity is not
    its own address (the website chat's verified user ``42`` is streamed at ``user:42``), else ``value``."""
    cls = channel_class(name)
    address_of = getattr(cls, "address_of", None) if cls is not None else None
    return str(address_of(kind, value)) if address_of is not None else value


def build_channels(deps: ChannelDeps) -> dict[str, Channel]:
    """One instance of every registered channel (name → channel)."""
    _load_builtin()
    return {name: factory(deps) for name, factory in sorted(_FACTORIES.items())}
