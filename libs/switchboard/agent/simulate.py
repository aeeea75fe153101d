"""``switchboard simulate``: one turn for a demo customer, to try the agent right after ``make run``.

The customer (channel ``whatsapp``, external id ``simulate:<name>``) and their open conversation are
found or created in the database. The turn goes to the running orchestrator over HTTP
(``POST /v1/turns`` with the service token) when it answers ``/healthz``; otherwise it runs in this
process, starting the offline model server on a free loopback port if no provider key is configured
and the model server is not running.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx
from sqlmodel import col

from switchboard.contracts import TurnRequest, TurnResult
from switchboard.conversations import start_conversation
from switchboard.db.engine import create_engine, session_factory, session_scope
from switchboard.db.models import Conversation, ConversationStatus, Customer
from switchboard.db.tenant_scope import TenantScope
from switchboard.settings import Settings
from switchboard.tenants import get_tenant
from switchboard.tools.mcp_client import McpToolSource

__all__ = ["SimulatedTurn", "simulate_turn", "prepare_request", "offline_server_if_needed"]

HEALTH_TIMEOUT_S = 1.0
TURN_HTTP_TIMEOUT_S = 180.0
"""Client timeout for ``POST /v1/turns``: above the default 120 s turn budget."""


@dataclass
class SimulatedTurn:
    result: TurnResult
    via: str
    """``orchestrator at <url>`` or ``in-process``."""
    conversation_id: uuid.UUID


async def prepare_request(
    settings: Settings, database_url: str, *, tenant: str, customer: str, text: str, new_conversation: bool
) -> TurnRequest:
    """Find or create the demo customer and their open (AI-mode) conversation; build the TurnRequest.

    Raises:
        TenantNotFound: no tenant with that slug or id.
    """
    engine = create_engine(database_url, pool_size=1)
    try:
        async with session_scope(session_factory(engine)) as session:
            tenant_row = await get_tenant(session, tenant)
            scope = TenantScope(session, tenant_row.id)
            external = f"simulate:{customer}"
            customer_row = await scope.first(
                Customer, Customer.channel == "whatsapp", Customer.external_user_id == external
            )
            if customer_row is None:
                customer_row = scope.add(
                    Customer(
                        channel="whatsapp", external_user_id=external, display_name=f"{customer} (simulated)"
                    )
                )
                await session.flush()
            conversation = None
            if not new_conversation:
                conversation = (
                    await session.exec(
                        scope.select(
                            Conversation,
                            Conversation.customer_id == customer_row.id,
                            col(Conversation.status) != ConversationStatus.closed.value,
                        )
                        .order_by(col(Conversation.created_at).desc())
                        .limit(1)
                    )
                ).first()
            if conversation is None:
                conversation = await start_conversation(
                    session, customer=customer_row, channel_account_id=None, reason="switchboard simulate"
                )
            return TurnRequest(
                tenant_id=tenant_row.id,
                conversation_id=conversation.id,
                inbound_message_id=uuid.uuid4(),
                channel="whatsapp",
                customer_id=customer_row.id,
                text=text,
            )
    finally:
        await engine.dispose()


def _answers(url: str) -> bool:
    try:
        return httpx.get(url + "/healthz", timeout=HEALTH_TIMEOUT_S).status_code == 200
    except httpx.HTTPError:
        return False


def _free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@contextmanager
def offline_server_if_needed(settings: Settings) -> Iterator[Settings]:
    """Settings whose ``model_server_port`` answers: the running server, or one started here (when no
    provider key is set and nothing answers on the port; ``switchboard simulate`` and ``eval``)."""
    from switchboard.llm.config import has_provider_key

    if has_provider_key(settings) or _answers(settings.service_url(settings.model_server_port)):
        yield settings
        return
    import uvicorn

    from switchboard.standins.offline_server import create_offline_app

    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_offline_app(), host="127.0.0.1", port=port, log_level="warning", access_log=False
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not _answers(f"http://127.0.0.1:{port}") and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield settings.model_copy(update={"model_server_port": port, "host": "127.0.0.1"})
    finally:
        server.should_exit = True
        thread.join(timeout=5)


async def simulate_turn(
    settings: Settings,
    database_url: str,
    *,
    tenant: str,
    text: str,
    customer: str = "demo-customer",
    new_conversation: bool = False,
    in_process: bool = False,
) -> SimulatedTurn:
    """Run one turn as the demo customer and return the result.

    Args:
        tenant: slug or id.
        text: what the customer writes.
        customer: name of the simulated customer (one conversation history per name).
        new_conversation: start a new conversation instead of continuing the open one.
        in_process: do not use the running orchestrator even if it answers.

    Raises:
        TenantNotFound: unknown tenant.
        httpx.HTTPStatusError: the running orchestrator refused the turn.
    """
    request = await prepare_request(
        settings, database_url, tenant=tenant, customer=customer, text=text, new_conversation=new_conversation
    )
    url = settings.orchestrator_url
    if not in_process and _answers(url):
        async with httpx.AsyncClient(timeout=TURN_HTTP_TIMEOUT_S) as client:
            response = await client.post(
                url + "/v1/turns",
                json=request.model_dump(mode="json"),
                headers={"Authorization": f"Bearer {settings.secret('service_token')}"},
            )
            response.raise_for_status()
        return SimulatedTurn(
            TurnResult.model_validate(response.json()), f"orchestrator at {url}", request.conversation_id
        )
    # LiteLLM takes seconds to import: only the in-process path pays for it
    from switchboard.agent.turns import Orchestrator
    from switchboard.crypto import CredentialCipher
    from switchboard.llm.router import ModelGateway

    with offline_server_if_needed(settings) as effective:
        engine = create_engine(database_url, pool_size=2)
        try:
            gateway = ModelGateway(
                settings=effective,
                cipher=CredentialCipher(effective.secret("encryption_key").encode()),
                max_concurrent_calls=effective.model_call_concurrency,
            )
            sessions = session_factory(engine)
            mcp_tools = McpToolSource.from_settings(
                effective, sessions
            )  # built-ins only if it is not running
            orchestrator = Orchestrator(sessions=sessions, gateway=gateway, toolsets=[mcp_tools])
            try:
                result = await orchestrator.handle_turn(request)
            finally:
                await mcp_tools.aclose()
        finally:
            await engine.dispose()
    return SimulatedTurn(result, "in-process", request.conversation_id)
