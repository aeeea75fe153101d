"""The channel registry is complete: a channel's facts come from its registered class, nowhere else.

A fake fourth channel (``sms``) is registered for the length of a test; the console's labels, the
reply identity kinds, the escalation reason of an echo, chart colours and message validation all
answer from it.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime
from typing import Any

import pytest
from pydantic import ValidationError
from switchboard.analytics.charts import line_chart
from switchboard.channels.base import (
    BUILTIN_CHANNELS,
    Capabilities,
    Channel,
    ChannelDeps,
    business_app_of,
    channel_capabilities,
    channel_class,
    channel_label,
    channel_names,
    register_channel,
    reply_identity_kinds,
    unregister_channel,
)
from switchboard.contracts import InboundMessage
from switchboard.conversations.identities import Identity, reply_address
from switchboard.db.models import IdentityKind
from switchboard.inbound.steps import business_app_echo_reason


class SmsChannel:
    """A fourth channel declared the way a real one is: its package would hold only this class."""

    name = "sms"
    capabilities = Capabilities(text_limit=160, reply_cap=False)
    label = "SMS Text"
    business_app = "SMS gateway portal"
    reply_identity_kinds = (IdentityKind.email, IdentityKind.wa_id)
    account_id_label = "sender number"
    chart_colour = "#123456"

    def __init__(self, deps: ChannelDeps) -> None:
        self.deps = deps

    async def send(self, account: Any, recipient: str, part: Any, *, correlation_id: str) -> str:
        return "sms-1"

    async def mark_read(self, account: Any, external_id: str, *, sender: str | None = None) -> None:
        return None

    async def fetch_media(self, account: Any, ref: str, *, max_bytes: int) -> tuple[bytes, str | None]:
        return b"", None

    async def on_record_only(self, session: Any, row: Any, ctx: Any) -> None:
        return None

    async def customer_profile(self, account: Any, sender: str) -> dict[str, str] | None:
        return None

    def acted_buttons(self, tenant_settings: Any) -> dict[str, str]:
        return {}

    def opt_out_reply(self, tenant_settings: Any) -> str:
        return ""

    def auto_reply_cap(self, tenant_settings: Any) -> tuple[int, float] | None:
        return None

    async def aclose(self) -> None:
        return None


@pytest.fixture
def sms() -> Iterator[type[SmsChannel]]:
    register_channel("sms", SmsChannel)
    try:
        yield SmsChannel
    finally:
        unregister_channel("sms")


def test_the_builtin_channels_declare_every_fact() -> None:
    assert set(channel_names()) == set(BUILTIN_CHANNELS)
    for name in BUILTIN_CHANNELS:
        cls = channel_class(name)
        assert cls is not None and cls.name == name
        assert cls.label and cls.business_app and cls.reply_identity_kinds
        assert {IdentityKind(kind) for kind in cls.reply_identity_kinds}
    assert channel_label("whatsapp") == "WhatsApp"
    assert business_app_of("gmail") == "Gmail mailbox"
    assert reply_identity_kinds("whatsapp") == ("wa_id", "bsuid")
    assert channel_capabilities("gmail") is not None and channel_capabilities("gmail").reply_cap  # type: ignore[union-attr]
    assert not channel_capabilities("whatsapp").reply_cap  # type: ignore[union-attr]


def test_a_fourth_channel_is_known_everywhere_from_its_class(sms: type[SmsChannel]) -> None:
    assert "sms" in channel_names() and channel_class("sms") is sms
    assert isinstance(sms(None), Channel)  # type: ignore[arg-type]
    assert channel_label("sms") == "SMS Text"
    assert business_app_echo_reason("sms") == "a human replied from the SMS gateway portal"
    identities = [Identity("sms", "wa_id", "15550001111"), Identity("sms", "email", "a@example.com")]
    assert reply_address(identities, reply_identity_kinds("sms")) == "a@example.com"
    chart = line_chart("Replies", [date(2026, 1, 1)], {"sms": [1.0]})
    assert 'style="fill:#123456">● SMS Text</text>' in chart
    message = InboundMessage(
        channel="sms",
        account_id="1",
        kind="text",
        external_id="m1",
        sender_id="s",
        sent_at=datetime.now(UTC),
    )
    assert message.channel == "sms"


def test_an_unregistered_channel_is_named_as_is_and_refused_in_a_message() -> None:
    assert channel_label("fax") == "fax" and reply_identity_kinds("fax") == ()
    assert business_app_echo_reason("fax") == "a human replied from the fax business app"
    with pytest.raises(ValidationError, match="unknown channel 'fax'"):
        InboundMessage(
            channel="fax",
            account_id="1",
            kind="text",
            external_id="m1",
            sender_id="s",
            sent_at=datetime.now(UTC),
        )


def test_registering_two_classes_under_one_name_is_refused(sms: type[SmsChannel]) -> None:
    other = type("OtherSms", (SmsChannel,), {})
    with pytest.raises(ValueError, match="registered twice"):
        register_channel("sms", other)
    with pytest.raises(ValueError, match="registered as 'text'"):
        register_channel("text", sms)
