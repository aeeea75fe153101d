"""A customer's message that arrives right after the orchestrator starts is answered: the orchestrator
is up (``/healthz`` 200 ``warming``) before LiteLLM is loaded, the turn waits for the import off the
event loop, and the worker asks again on a 503 ``warming`` without counting an attempt (else a
first turn that waited on the import ON the loop would time out three times and go to the dead letter)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
from switchboard.llm import start_litellm_import
from switchboard.service_app import WARM_UP_WAIT_S

from services.orchestrator.main import create_app
from tests.utils.agent import text
from tests.utils.instagram import load_payload, new_igsid
from tests.utils.net import free_port
from tests.utils.servers import serve_app
from tests.utils.workers import run_worker_burst

ROOT = Path(__file__).resolve().parents[3]


def _wait_healthz(url: str, process: subprocess.Popen[str], timeout_s: float = 90) -> dict:  # type: ignore[type-arg]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stdout.read() if process.stdout else ""
        try:
            answer = httpx.get(url + "/healthz", timeout=1.0)
            if answer.status_code == 200:
                return answer.json()
        except httpx.HTTPError:
            pass
        time.sleep(0.02)
    raise AssertionError("the orchestrator did not answer /healthz in time")


async def test_a_turn_sent_as_a_fresh_orchestrator_process_comes_up_is_answered(ig) -> None:  # type: ignore[no-untyped-def]
    """A fresh orchestrator process (LiteLLM not loaded yet), the turn sent the moment ``/healthz`` answers."""
    port = free_port()
    settings = ig.settings.model_copy(update={"orchestrator_port": port})
    env = {
        **{k: v for k, v in os.environ.items() if not k.endswith("_PORT")},
        "DATABASE_URL": settings.database_url,
        "REDIS_URL": settings.redis_url,
        "DATA_DIR": str(settings.data_dir),
        "MODEL_SERVER_PORT": str(settings.model_server_port),
        "MCP_TOOLS_PORT": str(settings.mcp_tools_port),
        "LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(ROOT),
        "EGRESS_ALLOW_LOOPBACK": "true",  # the scripted model server listens on loopback
    }
    process = await asyncio.to_thread(
        subprocess.Popen,
        [
            sys.executable,
            "-m",
            "uvicorn",
            "services.orchestrator.main:create_app",
            "--factory",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        first = await asyncio.to_thread(_wait_healthz, settings.orchestrator_url, process)
        customer = new_igsid()
        ig.script.push(text("Right after start."))
        await ig.post(load_payload("text_dm.json", account_id=ig.account_id, customer=customer))
        await run_worker_burst(settings)
        async with httpx.AsyncClient() as client:
            last = (await client.get(settings.orchestrator_url + "/healthz", timeout=5)).json()
    finally:
        process.terminate()
        await asyncio.to_thread(process.wait, 10)
    assert (first["status"], first["checks"]["litellm"]) == ("warming", "warming")
    assert [m["text"] for m in ig.sent()] == ["Right after start."]
    assert (last["status"], last["checks"]["litellm"]) == ("ok", "ok")


async def test_a_turn_waits_for_a_slow_warm_up_of_an_in_process_orchestrator(ig) -> None:  # type: ignore[no-untyped-def]
    """The orchestrator app in this process (as the suite serves it), its LiteLLM warm-up held for
    longer than a request waits (:data:`WARM_UP_WAIT_S`): the turn is answered 503 ``warming``, asked
    again by the worker without counting an attempt (3 tries, 5 s turn timeout), and answered once
    the warm-up is done; ``/healthz`` answers 200 ``warming`` all the while."""
    port = free_port()
    settings = ig.settings.model_copy(update={"orchestrator_port": port})
    held: concurrent.futures.Future[object] = concurrent.futures.Future()
    held.set_running_or_notify_cancel()
    app = create_app(settings)
    app.warm_ups = {"litellm": lambda: held}  # the real import is done in this process: hold a stand-in
    # done once held past a request's wait AND the real import (started by the session's orchestrator) is
    # done: the turn then calls LiteLLM, which must never be imported on the loop while a thread holds it
    release = threading.Timer(
        WARM_UP_WAIT_S + 1.5, lambda: held.set_result(start_litellm_import().result(timeout=120))
    )
    async with serve_app(app, port=port) as url:
        async with httpx.AsyncClient(base_url=url) as client:
            during = (await client.get("/healthz")).json()
        customer = new_igsid()
        ig.script.push(text("After the warm-up."))
        await ig.post(load_payload("text_dm.json", account_id=ig.account_id, customer=customer))
        release.start()
        await run_worker_burst(settings)
        async with httpx.AsyncClient(base_url=url) as client:
            after = (await client.get("/healthz")).json()
    assert (during["status"], during["checks"]["litellm"]) == ("warming", "warming")
    assert [m["text"] for m in ig.sent()] == ["After the warm-up."]
    assert (after["status"], after["checks"]["litellm"]) == ("ok", "ok")
