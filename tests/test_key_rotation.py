"""``switchboard keys rotate``: every stored credential re-encrypted with the new key, in one transaction.

Runs against a fresh database of its own: the rotation reads every tenant, and other tests leave
deliberately unreadable credentials behind in the shared one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from cryptography.fernet import Fernet
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import select
from sqlmodel.ext.asyncio.session import AsyncSession
from switchboard.crypto import CredentialCipher, CredentialDecryptError
from switchboard.db.models import ChannelAccount, Tenant
from switchboard.knowledge import set_tenant_embedding
from switchboard.llm.config import encrypt_api_key
from switchboard.settings import load_settings
from switchboard.tenants import add_channel_account, create_tenant

OLD = Fernet.generate_key().decode()
NEW = Fernet.generate_key().decode()


@dataclass
class Stored:
    url: str
    sessions: async_sessionmaker[AsyncSession]


@pytest.fixture
async def stored(scratch_database, tmp_path) -> AsyncIterator[Stored]:  # type: ignore[no-untyped-def]
    """Two tenants with credentials under OLD (a WhatsApp token each, one model key, one embedding
    key) and one tenant without any."""
    sessions = scratch_database.sessions  # migrated, and of this test's own
    old = CredentialCipher(OLD)
    settings = load_settings(data_dir=tmp_path, encryption_key=OLD, _env_file=None)
    async with sessions() as session, session.begin():
        shop = await create_tenant(session, slug="shop", name="Shop")
        cafe = await create_tenant(session, slug="cafe", name="Cafe")
        await create_tenant(session, slug="empty", name="No credentials")
        for tenant, number in ((shop, "106000000000101"), (cafe, "106000000000102")):
            await add_channel_account(
                session,
                tenant=tenant,
                channel="whatsapp",
                external_account_id=number,
                credentials={"access_token": f"EAAG-{tenant.slug}"},
                cipher=old,
            )
        shop.settings_extensions = {
            "llm": {
                "deployments": [
                    {
                        "id": "openai-main",
                        "provider": "openai",
                        "model": "gpt-4o-mini",
                        "api_key_encrypted": encrypt_api_key(old, "sk-shop"),
                    },
                    {"id": "local", "provider": "ollama", "model": "llama3.1", "priority": 2},
                ]
            }
        }
        set_tenant_embedding(settings, cafe, model="text-embedding-3-small", api_key="sk-embed-cafe")
    yield Stored(url=scratch_database.url, sessions=sessions)


async def _rotate(cli, url: str, keys: str, tmp_path) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    result = await cli.arun(
        "keys", "rotate", DATABASE_URL=url, REDIS_URL=None, DATA_DIR=str(tmp_path), ENCRYPTION_KEY=keys
    )
    return result.exit_code, result.stdout.strip(), result.stderr.strip()


async def _tokens(sessions: async_sessionmaker[AsyncSession]) -> dict[str, str]:
    """Every stored token, by where it is."""
    async with sessions() as session:
        accounts = (await session.exec(select(ChannelAccount))).all()
        tenants = {t.slug: t for t in (await session.exec(select(Tenant))).all()}
    tokens = {f"whatsapp:{a.external_account_id}": a.credentials_encrypted for a in accounts}
    tokens["llm:openai-main"] = tenants["shop"].settings_extensions["llm"]["deployments"][0][
        "api_key_encrypted"
    ]
    tokens["embedding:cafe"] = tenants["cafe"].settings_extensions["knowledge"]["embedding_api_key_encrypted"]
    return tokens


def _plain(tokens: dict[str, str], cipher: CredentialCipher) -> dict[str, dict]:
    return {where: cipher.decrypt(token) for where, token in tokens.items()}


PLAIN = {
    "whatsapp:106000000000101": {"access_token": "EAAG-shop"},
    "whatsapp:106000000000102": {"access_token": "EAAG-cafe"},
    "llm:openai-main": {"api_key": "sk-shop"},
    "embedding:cafe": {"api_key": "sk-embed-cafe"},
}


async def test_rotate_re_encrypts_every_credential_with_the_new_key(stored: Stored, tmp_path, cli) -> None:  # type: ignore[no-untyped-def]
    before = await _tokens(stored.sessions)
    assert _plain(before, CredentialCipher(OLD)) == PLAIN

    code, out, err = await _rotate(cli, stored.url, f"{NEW},{OLD}", tmp_path)
    assert (code, err) == (0, "")
    assert out == (
        "re-encrypted 4 credential(s) with the first of 2 key(s): 2 channel account(s), "
        "1 model provider key(s), 1 embedding key(s), 0 webhook secret(s), in 2 tenant(s)"
    )
    after = await _tokens(stored.sessions)
    assert _plain(after, CredentialCipher(NEW)) == PLAIN  # the new key alone reads everything
    for token in after.values():
        with pytest.raises(CredentialDecryptError):
            CredentialCipher(OLD).decrypt(token)
    async with stored.sessions() as session:  # the deployment without a key is left as it was
        shop = (await session.exec(select(Tenant).where(Tenant.slug == "shop"))).one()
    assert shop.settings_extensions["llm"]["deployments"][1] == {
        "id": "local",
        "provider": "ollama",
        "model": "llama3.1",
        "priority": 2,
    }

    # once the old key is gone, rotating again still works (and changes nothing readable)
    code, out, _ = await _rotate(cli, stored.url, NEW, tmp_path)
    assert code == 0 and out.startswith("re-encrypted 4 credential(s) with the first of 1 key(s)")
    assert _plain(await _tokens(stored.sessions), CredentialCipher(NEW)) == PLAIN


async def test_a_credential_no_key_reads_stops_the_rotation_and_changes_nothing(
    stored: Stored, tmp_path, cli
) -> None:  # type: ignore[no-untyped-def]
    async with stored.sessions() as session, session.begin():
        cafe = (await session.exec(select(Tenant).where(Tenant.slug == "cafe"))).one()
        cafe.settings_extensions = {
            **cafe.settings_extensions,
            "llm": {
                "deployments": [{"id": "lost", "model": "gpt-4o-mini", "api_key_encrypted": "not-a-token"}]
            },
        }
    before = await _tokens(stored.sessions)

    code, out, err = await _rotate(cli, stored.url, f"{NEW},{OLD}", tmp_path)
    assert (code, out) == (2, "")
    assert err == (
        "error: cannot decrypt tenant cafe: llm deployment lost with any ENCRYPTION_KEY: add the key it was "
        "encrypted with (comma-separated, after the new one) and run the rotation again"
    )
    assert await _tokens(stored.sessions) == before  # rolled back: the shop's tokens are still under OLD


async def test_without_the_old_key_nothing_is_rotated(stored: Stored, tmp_path, cli) -> None:  # type: ignore[no-untyped-def]
    before = await _tokens(stored.sessions)
    code, _, err = await _rotate(cli, stored.url, NEW, tmp_path)
    assert code == 2
    assert err.startswith("error: cannot decrypt tenant cafe: whatsapp account 106000000000102 with any")
    assert await _tokens(stored.sessions) == before
