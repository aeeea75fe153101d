"""A real turn with a tenant deployment at an address of the tenant's: the platform's keys never go
there (the listener answers the turn and records the credential headers it got)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from pydantic import SecretStr
from switchboard.agent import Orchestrator
from switchboard.crypto import CredentialCipher
from switchboard.llm.router import NO_KEY, ModelGateway

from tests.utils.agent import make_conversation
from tests.utils.key_listener import KeyListener, key_listener
from tests.utils.net import free_port

PLATFORM_OPENAI = "sk-platform-openai-canary-t8n2"
PLATFORM_ANTHROPIC = "sk-ant-platform-canary-t8n2"


@pytest.fixture
async def listener() -> AsyncIterator[KeyListener]:
    async with key_listener() as recording:
        yield recording


@pytest.mark.parametrize(("provider", "base_path"), [("openai", "/v1"), ("anthropic", "")])
async def test_a_turn_at_a_tenant_address_carries_no_platform_key(
    settings, sessions, make_tenant, listener, provider, base_path
):
    keyed = settings.model_copy(
        update={
            "openai_api_key": SecretStr(PLATFORM_OPENAI),
            "anthropic_api_key": SecretStr(PLATFORM_ANTHROPIC),
            "tenants_may_use_platform_keys": True,
        }
    )
    gateway = ModelGateway(settings=keyed, cipher=CredentialCipher(keyed.secret("encryption_key").encode()))
    orchestrator = Orchestrator(sessions=sessions, gateway=gateway)
    tenant = await make_tenant(
        llm={
            "deployments": [
                {
                    "id": "theirs",
                    "provider": provider,
                    "model": "gpt-4o-mini",
                    "api_base": listener.url + base_path,
                }
            ]
        }
    )
    conversation = await make_conversation(sessions, tenant)
    result = await orchestrator.handle_turn(conversation.request("Where is my order?"))
    assert result.reply == "Listener answer." and result.model == "theirs"  # the listener answered
    assert listener.seen
    assert not listener.carried(PLATFORM_OPENAI) and not listener.carried(PLATFORM_ANTHROPIC)
    assert set(listener.credentials()) == ({f"Bearer {NO_KEY}"} if provider == "openai" else {NO_KEY})


async def test_a_simulated_turn_from_the_cli_carries_no_platform_key(cli, make_tenant, listener):
    tenant = await make_tenant(
        llm={
            "deployments": [
                {
                    "id": "theirs",
                    "provider": "openai",
                    "model": "gpt-4o-mini",
                    "api_base": listener.url + "/v1",
                }
            ]
        }
    )
    outcome = await cli.arun(
        "simulate",
        "--tenant",
        tenant.slug,
        "Where is my order?",
        ORCHESTRATOR_PORT=str(free_port()),  # nothing listens: the turn runs in this process
        OPENAI_API_KEY=PLATFORM_OPENAI,
        TENANTS_MAY_USE_PLATFORM_KEYS="true",
    )
    assert outcome.exit_code == 0, outcome.output
    assert "Listener answer." in outcome.output
    assert listener.seen and not listener.carried(PLATFORM_OPENAI), listener.seen
