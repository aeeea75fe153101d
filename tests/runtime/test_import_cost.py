"""Processes that never call a model never import LiteLLM (about 4 s and 150 MB at start-up).

Each check runs in a fresh interpreter, as ``switchboard run`` starts the service: import the
service module, build the app and run its lifespan against the test database and Redis (the two
workers: build their ARQ settings and run their start-up and shut-down hooks), then look at
``sys.modules``. The orchestrator is the one service that loads LiteLLM at start-up, in a thread
once it is up (``/healthz`` says ``warming`` meanwhile), so neither its ``/healthz`` nor its event
loop waits for the import; a request meanwhile awaits it off the loop.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from switchboard.settings import Settings

ROOT = Path(__file__).resolve().parents[2]

_START_HTTP_SERVICE = """
import asyncio, importlib, json, sys
from switchboard.settings import load_settings

async def main():
    app = importlib.import_module("services.{name}.main").create_app(load_settings())
    async with app.router.lifespan_context(app):
        pass

asyncio.run(main())
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "litellm")))
"""

_START_WORKER = """
import asyncio, importlib, json, sys
from arq.connections import create_pool
from switchboard.queue import Queue
from switchboard.worker import WORKER_SETTINGS_BUILDERS
from switchboard.settings import load_settings

importlib.import_module("services.{service}.main")

async def main():
    worker = WORKER_SETTINGS_BUILDERS[Queue.{queue}](load_settings())
    ctx = {{"redis": await create_pool(worker.redis_settings)}}
    await worker.on_startup(ctx)
    await worker.on_shutdown(ctx)
    await ctx["redis"].aclose()

asyncio.run(main())
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "litellm")))
"""


def _run(code: str, settings: Settings) -> list[str]:
    env = {
        **os.environ,
        "DATABASE_URL": settings.database_url or "",
        "REDIS_URL": settings.redis_url or "",
        "DATA_DIR": str(settings.data_dir),
        "LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", ["whatsapp", "instagram", "gmail", "console", "mcp_tools", "model_server"])
def test_services_that_call_no_model_never_import_litellm(name: str, settings: Settings) -> None:
    """The channel services, the console, the MCP tool server and the offline model server (which
    answers model calls, it makes none) start without LiteLLM (``make run`` warm start)."""
    assert _run(_START_HTTP_SERVICE.format(name=name), settings) == []


@pytest.mark.parametrize(("service", "queue"), [("worker", "chat"), ("worker_background", "background")])
def test_worker_start_up_never_imports_litellm(service: str, queue: str, settings: Settings) -> None:
    """LiteLLM loads on a worker's first model call (a handoff or memory summary, an embedding)."""
    assert _run(_START_WORKER.format(service=service, queue=queue), settings) == []


_START_ORCHESTRATOR = """
import asyncio, importlib, json, sys, time
import httpx
from switchboard.settings import load_settings

async def main():
    app = importlib.import_module("services.orchestrator.main").create_app(load_settings())
    built = "litellm" in sys.modules or "mcp" in sys.modules
    ticks_while_warming = 0
    warming = True

    async def tick():  # the loop keeps running while LiteLLM loads (it stopped dead when it loaded on the loop)
        nonlocal ticks_while_warming
        while warming:
            await asyncio.sleep(0.01)
            ticks_while_warming += warming

    async with app.router.lifespan_context(app):
        ticker = asyncio.create_task(tick())
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://orchestrator") as client:
            first = (await client.get("/healthz")).json()
            # a gated request (no service token: 401 once warm) waits for the import, or is told to retry
            answers = []
            while True:
                response = await client.post("/v1/turns", json={})
                answers.append([response.status_code, response.json().get("detail")])
                if response.status_code != 503:
                    break
                await asyncio.sleep(float(response.headers["Retry-After"]))
            warming = False
            await ticker
            last = (await client.get("/healthz")).json()
    return [built, first["status"], first["checks"]["litellm"], answers[-1], answers[:-1], ticks_while_warming > 5,
            last["status"], last["checks"]["litellm"], "litellm" in sys.modules]

print(json.dumps(asyncio.run(main())))
"""


def test_the_orchestrator_is_up_before_litellm_and_its_requests_await_it_off_the_loop(
    settings: Settings,
) -> None:
    """The orchestrator builds its app and answers ``/healthz`` (``warming``) before LiteLLM (~4 s of
    CPU, the last service up in ``make run`` by 7-17 s) is loaded; a request meanwhile waits for the
    import (or is answered 503 ``warming`` after 2 s, asked again) while the event loop keeps running,
    then gets its real answer; ``/healthz`` says ``ok`` afterwards."""
    built, status, check, answer, retries, loop_ran, last_status, last_check, loaded = _run(
        _START_ORCHESTRATOR, settings
    )
    assert (built, status, check) == (False, "warming", "warming")
    assert answer[0] == 401  # the request reached the route (no token) once LiteLLM was in
    assert all(retry == [503, "warming"] for retry in retries)
    assert loop_ran
    assert (last_status, last_check, loaded) == ("ok", "ok", True)


def _loaded_after(code: str) -> set[str]:
    """Our modules in ``sys.modules`` after ``code`` runs in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", code + "\nimport json, sys; print(json.dumps(sorted(sys.modules)))"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return {m for m in json.loads(done.stdout.strip().splitlines()[-1]) if m.startswith("switchboard")}


def test_a_channel_settings_section_loads_without_the_channel() -> None:
    """Every process imports the three settings sections (``switchboard.channels``); that must not pull
    in a channel's routes, sandbox or send client, and the public names still resolve."""
    loaded = _loaded_after("import switchboard.channels")
    assert {"switchboard.channels.whatsapp.settings", "switchboard.channels.gmail.settings"} <= loaded
    assert (
        not {
            "switchboard.channels.whatsapp.routes",
            "switchboard.standins.whatsapp",
            "switchboard.channels.whatsapp.send",
            "switchboard.channels.whatsapp.channel",
        }
        & loaded
    )
    from switchboard.channels import whatsapp
    from switchboard.channels.whatsapp.routes import webhook_router

    assert whatsapp.webhook_router is webhook_router
    assert set(whatsapp.__all__) <= set(dir(whatsapp))
    with pytest.raises(AttributeError):
        _ = whatsapp.no_such_name


def test_switchboard_run_imports_only_the_system_commands() -> None:
    """``switchboard run`` (and ``status``, ``version``) loads ``switchboard.cli.system`` alone, not
    the other command modules (~0.7 s CPU at every ``make run``); any other command loads them all."""
    run = _loaded_after("from switchboard.cli.root import cli_command; cli_command(['run'])")
    assert "switchboard.cli.system" in run
    assert not {"switchboard.cli.kb", "switchboard.cli.evals", "switchboard.channels.gmail.cli"} & run
    every = _loaded_after("from switchboard.cli.root import cli_command; cli_command(['kb', 'search'])")
    assert {"switchboard.cli.kb", "switchboard.cli.evals", "switchboard.channels.gmail.cli"} <= every


def test_help_lists_every_command_group() -> None:
    """``switchboard --help`` still shows every command: the lazy loading only skips modules for
    :data:`~switchboard.cli.root.FAST_COMMANDS`."""
    done = subprocess.run(
        [sys.executable, "-m", "switchboard.cli", "--help"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for name in ("run", "status", "version", "eval", "db", "tenant", "kb", "channel", "simulate", "feedback"):
        assert f" {name} " in done.stdout, name
