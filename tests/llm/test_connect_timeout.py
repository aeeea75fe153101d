"""A provider that cannot be reached fails over within ``llm.connect_timeout_s``, not ``request_timeout_s``.

The unreachable provider is a loopback listener whose accept queue is full: the kernel drops every new
connection attempt (the client waits for the SYN's answer), as with a provider address that blackholes
packets."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator

import pytest
from switchboard.llm.config import LLMSettings
from switchboard.standins.offline_server import ScriptedResponse

from tests.utils.agent import deployment, unique_model

MESSAGES = [{"role": "user", "content": "hello"}]


@pytest.fixture
def unreachable() -> Iterator[str]:
    """``http://127.0.0.1:<port>`` where connections are never established (a full accept queue)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = server.getsockname()[1]
    held: list[socket.socket] = []
    for _ in range(4):  # fill the accept queue; the attempts that time out are dropped SYNs already
        client = socket.socket()
        client.settimeout(0.3)
        try:
            client.connect(("127.0.0.1", port))
            held.append(client)
        except OSError:
            client.close()
            break
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        for client in held:
            client.close()
        server.close()


async def test_an_unreachable_primary_fails_over_after_the_connect_timeout(
    gateway, offline_model, unreachable
):
    state, url = offline_model
    backup = unique_model("backup")
    state.script(backup).push(ScriptedResponse(content="from the backup"))
    llm = LLMSettings.model_validate(
        {
            "deployments": [
                deployment(unreachable, unique_model("unreachable"), priority=1),
                deployment(url, backup, priority=2),
            ],
            "num_retries": 0,
            "request_timeout_s": 30,
            "connect_timeout_s": 1,
        }
    )
    router = gateway.router_for(uuid.uuid4(), llm)
    started = time.monotonic()
    reply = await gateway.complete(router, MESSAGES, tools=None, llm=llm, trace_id="t")
    took_s = time.monotonic() - started
    assert (reply.content, reply.fallback_used) == ("from the backup", True)
    assert took_s < 3, took_s  # the connect timeout (1 s), not the request timeout (30 s)
