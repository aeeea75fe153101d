"""Per-account verify tokens of the Meta webhook handshake, and the record of the last handshake."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st
from switchboard.channels.handshakes import account_of_verify_token, account_verify_token, last_handshake

from tests.utils.whatsapp import VERIFY_TOKEN, channel_service, new_phone_number_id

ids = st.text("0123456789", min_size=1, max_size=30)


@given(
    account_id=ids,
    channel=st.sampled_from(["whatsapp", "instagram"]),
    secret=st.text(min_size=1, max_size=40),
)
def test_an_accounts_verify_token_names_it_and_nothing_else(account_id, channel, secret) -> None:  # type: ignore[no-untyped-def]
    token = account_verify_token(secret, channel, account_id)
    assert account_of_verify_token(secret, channel, token) == account_id
    other = "instagram" if channel == "whatsapp" else "whatsapp"
    assert account_of_verify_token(secret, other, token) is None  # another channel's token
    assert account_of_verify_token(secret + "x", channel, token) is None  # another deployment's
    forged = token[:-1] + ("0" if token[-1] != "0" else "1")
    assert account_of_verify_token(secret, channel, forged) is None


@given(token=st.text(max_size=80))
def test_any_other_text_is_no_accounts_token(token) -> None:  # type: ignore[no-untyped-def]
    account = account_of_verify_token(VERIFY_TOKEN, "whatsapp", token)
    assert account is None or account_verify_token(VERIFY_TOKEN, "whatsapp", account) == token


async def test_webhook_answers_an_accounts_own_token_and_records_when(make_settings) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings()
    number = new_phone_number_id()
    own = account_verify_token(VERIFY_TOKEN, "whatsapp", number)
    async with channel_service(settings) as wa:
        redis = wa.app.state.resources.redis
        assert await last_handshake(redis, "whatsapp", number) is None
        ok = await wa.client.get(
            "/webhooks/whatsapp",
            params={"hub.mode": "subscribe", "hub.verify_token": own, "hub.challenge": "77"},
        )
        assert (ok.status_code, ok.text) == (200, "77")
        when = await last_handshake(redis, "whatsapp", number)
        assert when is not None and datetime.now(UTC) - when < timedelta(seconds=30)
        forged = await wa.client.get(
            "/webhooks/whatsapp",
            params={"hub.mode": "subscribe", "hub.verify_token": own[:-2] + "00", "hub.challenge": "1"},
        )
        other_channel = await wa.client.get(
            "/webhooks/whatsapp",
            params={
                "hub.mode": "subscribe",
                "hub.verify_token": account_verify_token(VERIFY_TOKEN, "instagram", number),
                "hub.challenge": "1",
            },
        )
        wrong_mode = await wa.client.get(
            "/webhooks/whatsapp",
            params={"hub.mode": "unsubscribe", "hub.verify_token": own, "hub.challenge": "1"},
        )
    assert [r.status_code for r in (forged, other_channel, wrong_mode)] == [403, 403, 403]
