"""Going to production: required secrets fail fast, the Graph API is chosen per account, media calls go
where MODEL_SERVER_URL says and an empty provider key counts as unset."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from switchboard.channels.base import ChannelDeps, OutboundPart
from switchboard.channels.whatsapp.channel import WhatsAppChannel
from switchboard.db.models import ChannelAccount
from switchboard.errors import SettingsError
from switchboard.inbound.media import describe_image, transcribe
from switchboard.settings import GENERATED_SECRETS, REAL_WHATSAPP_GRAPH_BASE_URL, load_settings

from tests.utils.servers import serve_app

ALL_SECRETS = {name: f"value-of-{name}" for name in GENERATED_SECRETS} | {
    "encryption_key": "bG9jYWwtdGVzdC1rZXktMzItYnl0ZXMtbG9uZy0wMDA="
}


def test_without_generation_a_missing_secret_is_named_and_nothing_is_written(tmp_path) -> None:  # type: ignore[no-untyped-def]
    settings = load_settings(
        _env_file=None, data_dir=tmp_path, generate_secrets=False, **(ALL_SECRETS | {"meta_app_secret": ""})
    )
    with pytest.raises(SettingsError) as raised:
        settings.secret("meta_app_secret")
    assert raised.value.setting == "META_APP_SECRET"
    assert "GENERATE_SECRETS=false" in str(raised.value)
    with pytest.raises(SettingsError) as raised:
        settings.require_secrets()
    assert raised.value.setting == "META_APP_SECRET"
    assert not (tmp_path / "secrets").exists()  # no per-container value was generated
    assert settings.secret("meta_verify_token") == "value-of-meta_verify_token"


def test_require_secrets_lists_every_missing_one_and_passes_when_all_are_set(tmp_path) -> None:  # type: ignore[no-untyped-def]
    missing = load_settings(_env_file=None, data_dir=tmp_path, generate_secrets=False)
    with pytest.raises(SettingsError) as raised:
        missing.require_secrets()
    assert raised.value.setting == "ENCRYPTION_KEY"
    for name in GENERATED_SECRETS:
        assert name.upper() in str(raised.value)
    load_settings(_env_file=None, data_dir=tmp_path, generate_secrets=False, **ALL_SECRETS).require_secrets()
    # `switchboard run` (the default) still generates them into DATA_DIR/secrets
    generated = load_settings(_env_file=None, data_dir=tmp_path)
    generated.require_secrets()
    assert len(generated.secret("meta_app_secret")) == 32
    assert (tmp_path / "secrets" / "meta_app.secret").exists()


def test_a_service_and_a_worker_refuse_to_start_without_a_required_secret(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from services.whatsapp.main import create_app
    from services.worker.main import main as worker_main

    settings = load_settings(
        _env_file=None, data_dir=tmp_path, generate_secrets=False, **(ALL_SECRETS | {"meta_verify_token": ""})
    )
    with pytest.raises(SettingsError) as raised:
        create_app(settings)
    assert raised.value.setting == "META_VERIFY_TOKEN"

    monkeypatch.chdir(tmp_path)  # no .env of the developer's
    for name, value in ALL_SECRETS.items():
        monkeypatch.setenv(name.upper(), value)
    monkeypatch.setenv("GENERATE_SECRETS", "false")
    monkeypatch.setenv("SERVICE_TOKEN", "")
    monkeypatch.setenv("DATA_DIR", str(tmp_path))
    with pytest.raises(SettingsError) as raised:
        worker_main([])
    assert raised.value.setting == "SERVICE_TOKEN"


def test_an_empty_provider_key_is_unset() -> None:
    settings = load_settings(_env_file=None, openai_api_key="", anthropic_api_key="  ")
    assert settings.openai_api_key is None
    assert settings.anthropic_api_key is None
    assert load_settings(_env_file=None, openai_api_key="sk-x").openai_api_key is not None


@pytest.fixture
def model_server() -> Any:
    """Stands in for the offline model server in another container: records paths and auth headers."""
    app = FastAPI()
    seen: list[tuple[str, str | None]] = []

    @app.post("/v1/audio/transcriptions")
    async def transcriptions(request: Request) -> dict:
        seen.append((request.url.path, request.headers.get("authorization")))
        return {"text": "hello from the voice note"}

    @app.post("/v1/chat/completions")
    async def completions(request: Request) -> dict:
        seen.append((request.url.path, request.headers.get("authorization")))
        return {"choices": [{"message": {"content": "A black wall fan."}}]}

    with serve_app(app) as url:
        yield url, seen


async def test_media_calls_go_to_model_server_url_when_the_openai_key_is_empty(model_server) -> None:  # type: ignore[no-untyped-def]
    url, seen = model_server
    # compose: the model server is another container, OPENAI_API_KEY is passed through empty
    settings = load_settings(
        _env_file=None, openai_api_key="", model_server_url_override=url, model_server_port=1
    )
    async with httpx.AsyncClient() as http:
        assert await transcribe(http, settings, b"OggS\x00voice", "audio/ogg") == "hello from the voice note"
        assert await describe_image(http, settings, b"\xff\xd8\xffjpeg", "image/jpeg") == "A black wall fan."
    assert seen == [("/v1/audio/transcriptions", None), ("/v1/chat/completions", None)]


@pytest.fixture
def real_graph_api() -> Any:
    """Stands in for graph.facebook.com (outside the project): records the numbers it is asked to send from."""
    app = FastAPI()
    senders: list[str] = []

    @app.post("/{version}/{phone_number_id}/messages")
    async def messages(version: str, phone_number_id: str) -> dict:
        senders.append(phone_number_id)
        return {"messages": [{"id": f"wamid.REAL{len(senders)}"}]}

    with serve_app(app) as url:
        yield url, senders


async def test_the_graph_api_is_chosen_per_account_not_per_process(graph_sandbox, real_graph_api) -> None:  # type: ignore[no-untyped-def]
    """One real number and the demo's sandbox number in one worker: each send reaches its own API."""
    sandbox_url, sandbox = graph_sandbox
    real_url, real_senders = real_graph_api
    settings = load_settings(
        _env_file=None,
        whatsapp_graph_base_url=real_url,  # the process default: "the real API"
        whatsapp_url_override=sandbox_url.removesuffix("/_sandbox/graph"),  # the WhatsApp service (sandbox)
    )
    channel = WhatsAppChannel(ChannelDeps(settings=settings, cipher=None, http=None))  # type: ignore[arg-type]
    tenant_id = uuid.uuid4()
    real_number, demo_number = str(uuid.uuid4().int)[:15], str(uuid.uuid4().int)[:15]
    real = ChannelAccount(tenant_id=tenant_id, channel="whatsapp", external_account_id=real_number)
    demo = ChannelAccount(
        tenant_id=tenant_id, channel="whatsapp", external_account_id=demo_number, api_base_url="sandbox"
    )
    try:
        part = OutboundPart(type="text", text="Hi there")
        assert await channel.send(real, "15550100099", part, correlation_id="c1") == "wamid.REAL1"
        await channel.send(demo, "15550100099", part, correlation_id="c2")
        await channel.send(real, "15550100099", part, correlation_id="c3")
        buttons = OutboundPart(  # interactive sends follow the account too (they once used the default)
            type="interactive",
            interactive={
                "type": "button",
                "body": {"text": "Pick one"},
                "action": {"buttons": [{"type": "reply", "reply": {"id": "a", "title": "A"}}]},
            },
        )
        await channel.send(demo, "15550100099", buttons, correlation_id="c4")
    finally:
        await channel.aclose()
    assert real_senders == [real_number, real_number]
    sent = sandbox.sent_by(demo_number)
    assert [m["text"] for m in sent[:1]] == ["Hi there"]
    assert sent[1]["interactive"]["body"]["text"] == "Pick one"
    assert sandbox.sent_by(real_number) == []
    assert settings.channel_api_base_url("whatsapp", None) == real_url
    assert (
        load_settings(_env_file=None).channel_api_base_url("whatsapp", None) == REAL_WHATSAPP_GRAPH_BASE_URL
    )
    explicit = "https://graph.example.test/"
    assert settings.channel_api_base_url("whatsapp", explicit) == explicit.rstrip("/")


async def test_queue_depth_counts_ready_jobs_only(redis_url) -> None:  # type: ignore[no-untyped-def]
    from redis.asyncio import Redis
    from switchboard.queue.depth import queue_depths

    queue = f"arq:queue:test-{uuid.uuid4().hex[:8]}"
    redis = Redis.from_url(redis_url)
    try:
        now = 1_800_000_000_000
        running = f"running-{uuid.uuid4().hex[:8]}"
        await redis.zadd(
            queue, {"ready-1": now - 5_000, "ready-2": now, "deferred": now + 60_000, running: now - 9_000}
        )
        await redis.set(f"arq:in-progress:{running}", b"1", px=60_000)  # a worker runs it: not waiting
        assert await queue_depths(redis, [queue, queue + ":empty"], now_ms=now) == {
            queue: 2,
            queue + ":empty": 0,
        }
    finally:
        await redis.delete(queue, f"arq:in-progress:{running}")
        await redis.aclose()


def test_queue_depth_prints_one_cloudwatch_emf_line_per_queue(cli) -> None:  # type: ignore[no-untyped-def]
    import json

    result = cli.run("queue", "depth", "--emf")
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [record["Queue"] for record in records] == ["chat", "background"]
    for record in records:
        assert record["_aws"]["CloudWatchMetrics"] == [
            {
                "Namespace": "Switchboard/Queues",
                "Dimensions": [["Queue"]],
                "Metrics": [{"Name": "QueueDepth", "Unit": "Count"}],
            }
        ]
        assert isinstance(record["QueueDepth"], int) and record["QueueDepth"] >= 0
        assert isinstance(record["_aws"]["Timestamp"], int)


def test_the_container_probe_passes_on_200_only() -> None:
    from switchboard.probe import main as probe

    app = FastAPI()

    @app.get("/healthz")
    async def healthz() -> dict:
        return {"status": "ok"}

    @app.get("/degraded", status_code=503)
    async def degraded() -> dict:
        return {"status": "degraded"}

    with serve_app(app) as url:
        assert probe([f"{url}/healthz"]) == 0
        assert probe([f"{url}/degraded"]) == 1
    assert probe(["http://127.0.0.1:9/healthz"]) == 1  # nothing listens
    assert probe([]) == 2


# --- Makefile: what a new operator hit -------------------------------------------------------------

MAKEFILE = __import__("pathlib").Path(__file__).resolve().parents[1] / "Makefile"


def _make(folder, *args: str, **env: str):  # type: ignore[no-untyped-def]
    import os
    import subprocess

    environment = {k: v for k, v in os.environ.items() if k != "DATA_DIR"} | env
    return subprocess.run(
        ["make", "--no-print-directory", "-C", str(folder), "-f", str(MAKEFILE), *args],
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
    )


def test_clean_data_deletes_the_data_dir_it_is_given_and_nothing_else(tmp_path) -> None:  # type: ignore[no-untyped-def]
    default, chosen, from_env_file = tmp_path / ".switchboard", tmp_path / "chosen", tmp_path / "from-dotenv"
    for folder in (default, chosen, from_env_file):
        (folder / "secrets").mkdir(parents=True)
    done = _make(tmp_path, "clean-data", DATA_DIR=str(chosen))
    assert done.returncode == 0, done.stderr
    assert not chosen.exists() and default.exists() and from_env_file.exists()
    (tmp_path / ".env").write_text(f"LOG_LEVEL=INFO\nDATA_DIR={from_env_file}\n")
    assert _make(tmp_path, "clean-data").returncode == 0
    assert not from_env_file.exists() and default.exists()
    (tmp_path / ".env").unlink()
    assert _make(tmp_path, "clean-data").returncode == 0
    assert not default.exists()
    refused = _make(tmp_path, "clean-data", DATA_DIR="/")
    assert refused.returncode != 0 and "refusing to delete DATA_DIR=/" in refused.stderr


def test_a_venv_made_with_the_wrong_python_is_recreated(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import sys

    old = tmp_path / ".venv" / "bin"
    old.mkdir(parents=True)
    (old / "python").write_text("#!/bin/sh\nexit 1\n")  # answers like a Python 3.10: version check fails
    (old / "python").chmod(0o755)
    done = _make(tmp_path, "-n", "clean-data")
    assert "was made with a Python older than 3.11" in done.stdout + done.stderr
    assert not (tmp_path / ".venv").exists()
    old.mkdir(parents=True)
    (old / "python").symlink_to(sys.executable)  # a good one is kept
    done = _make(tmp_path, "-n", "clean-data")
    assert "older than 3.11" not in done.stdout + done.stderr
    assert (old / "python").exists()


# --- CLI: what a new operator hit ------------------------------------------------------------------


def test_status_in_a_folder_with_no_data_says_not_running_and_asks_no_port(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    app = FastAPI()

    @app.get("/healthz")
    async def healthz() -> dict:  # another program on the WhatsApp port, answering 200
        return {"status": "ok"}

    with serve_app(app) as url:
        port = url.rsplit(":", 1)[1]
        fresh = cli.run("status", DATA_DIR=str(tmp_path / "nothing"), REDIS_URL=None, WHATSAPP_PORT=port)
        assert fresh.exit_code == 1
        assert fresh.stdout == (
            f"not running: start it with make run (DATA_DIR={(tmp_path / 'nothing').resolve()}: no data there yet)\n"
        )
        (tmp_path / "stopped").mkdir()
        stopped = cli.run("status", DATA_DIR=str(tmp_path / "stopped"), REDIS_URL=None)
        assert stopped.exit_code == 1 and "no live `switchboard run` there" in stopped.stdout
        # with REDIS_URL (services elsewhere) the ports are asked, and a stranger on one is not healthy
        asked = cli.run("status", DATA_DIR=str(tmp_path / "nothing"), WHATSAPP_PORT=port)
    assert asked.exit_code == 1
    (line,) = [line for line in asked.stdout.splitlines() if line.startswith("whatsapp ")]
    assert "DOWN  another program answers there (not Switchboard)" in line


def test_db_upgrade_to_an_unknown_revision_is_one_line_and_exit_2(cli) -> None:  # type: ignore[no-untyped-def]
    from switchboard.db.migrate import head_revision

    result = cli.run("db", "upgrade", "--revision", "nosuchrev")
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: no migration revision 'nosuchrev': use head, base, a relative step")
    assert line.endswith(head_revision()) and "one of 0001, 0002_turns, " in line
    assert cli.run("db", "upgrade", "--revision", "head").exit_code == 0


async def test_a_new_tenant_has_the_knowledge_tool_enabled_and_is_told_so(cli, sessions) -> None:  # type: ignore[no-untyped-def]
    from switchboard.tenants import get_tenant
    from switchboard.tools.toolbox import list_assignments

    slug = f"new-{uuid.uuid4().hex[:8]}"
    result = await cli.arun("tenant", "create", "--slug", slug, "--name", "New Shop")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1] == (
        f"enabled tools: search_knowledge_base (others: `switchboard tools list --tenant {slug}`, "
        "`switchboard tools enable`)"
    )
    async with sessions() as session:
        tenant = await get_tenant(session, slug)
        enabled = [a.tool_name for a in await list_assignments(session, tenant.id) if a.enabled]
    assert enabled == ["search_knowledge_base"]


def test_version_command(cli) -> None:  # type: ignore[no-untyped-def]
    from switchboard import __version__

    assert cli.run("version").stdout == f"switchboard {__version__}\n"
    assert cli.run("--version").stdout == f"switchboard {__version__}\n"


async def test_channel_list_names_each_account_and_its_api(cli, make_tenant, sessions, settings) -> None:  # type: ignore[no-untyped-def]
    from switchboard.tenants import add_channel_account

    tenant = await make_tenant()
    number, other = str(uuid.uuid4().int)[:15], str(uuid.uuid4().int)[:15]
    async with sessions() as session, session.begin():
        await add_channel_account(
            session, tenant=tenant, channel="whatsapp", external_account_id=number, api_base_url="sandbox"
        )
        await add_channel_account(session, tenant=tenant, channel="whatsapp", external_account_id=other)
    result = await cli.arun(
        "channel",
        "list",
        "--tenant",
        tenant.slug,
        WHATSAPP_GRAPH_BASE_URL=None,
        WHATSAPP_PORT=str(settings.whatsapp_port),
    )
    assert result.exit_code == 0, result.output
    header, *rows = result.stdout.splitlines()
    assert header.split() == ["TENANT", "CHANNEL", "ACCOUNT", "STATUS", "TOKEN", "API"]
    lines = sorted(rows, key=lambda line: number not in line)
    assert lines[0].split() == [
        tenant.slug,
        "whatsapp",
        number,
        "active",
        "token=not",
        "needed",
        "(sandbox)",
        f"api={settings.whatsapp_sandbox_url}",
    ]
    assert lines[1].split() == [
        tenant.slug,
        "whatsapp",
        other,
        "active",
        "token=missing",
        "api=https://graph.facebook.com",
    ]
    empty = await make_tenant()
    assert "no channel accounts" in (await cli.arun("channel", "list", "--tenant", empty.slug)).stdout


async def test_agents_remove_refuses_while_a_conversation_is_theirs(cli, make_tenant, sessions) -> None:  # type: ignore[no-untyped-def]
    from switchboard.db.models import Conversation, HumanAgent

    from tests.utils.handoff import make_agent, make_customer_conversation, reload

    tenant = await make_tenant()
    busy, idle = await make_agent(sessions, tenant, "Rita"), await make_agent(sessions, tenant, "Omar")
    _, conversation = await make_customer_conversation(sessions, tenant)
    async with sessions() as session, session.begin():
        row = await session.get(Conversation, conversation.id)
        row.status, row.assigned_agent_id = "human", busy.id
    refused = await cli.arun("agents", "remove", "--tenant", tenant.slug, "--name", "Rita")
    assert refused.exit_code == 2
    assert refused.stderr.strip() == (
        "error: Rita still has 1 open conversation(s): end or transfer them first (/end or /transfer from their WhatsApp)"
    )
    removed = await cli.arun("agents", "remove", "--tenant", tenant.slug, "--phone", f"+{idle.phone}")
    assert removed.exit_code == 0 and removed.stdout == f"removed agent Omar +{idle.phone}\n"
    assert await reload(sessions, HumanAgent, idle.id) is None
    assert (await reload(sessions, HumanAgent, busy.id)).name == "Rita"


def test_no_help_page_shows_a_bool_or_str_placeholder() -> None:
    from click.testing import CliRunner
    from switchboard.cli.root import cli_command

    command = cli_command()

    def pages(group, path):  # type: ignore[no-untyped-def]
        yield path
        for name, sub in getattr(group, "commands", {}).items():
            yield from pages(sub, [*path, name])

    seen = 0
    for path in pages(command, []):
        result = CliRunner().invoke(command, [*path, "--help"], terminal_width=200)
        assert result.exit_code == 0, (path, result.output)
        assert "<bool>" not in result.output and "<str>" not in result.output, (path, result.output)
        seen += 1
    assert seen > 40
    agents_add = CliRunner().invoke(command, ["agents", "add", "--help"], terminal_width=200).output
    assert "--tenant  -t      TENANT" in agents_add and "--online " in agents_add


def test_csv_import_has_its_request_body_in_the_openapi_schema(settings) -> None:  # type: ignore[no-untyped-def]
    from services.orchestrator.main import create_app

    operation = create_app(settings).openapi()["paths"]["/v1/admin/tenants/{slug}/data/{kind}"]["post"]
    body = operation["requestBody"]
    assert body["required"] is True
    assert body["content"]["text/csv"]["schema"] == {"type": "string", "format": "binary"}
    assert body["content"]["text/csv"]["example"].startswith("sku,name,")


async def test_channel_list_and_console_agree_on_a_needs_reauth_mailbox(cli, make_tenant, sessions) -> None:  # type: ignore[no-untyped-def]
    from switchboard.console.channel_pages import channel_health
    from switchboard.db.models import GmailMailbox
    from switchboard.tenants import add_channel_account

    tenant = await make_tenant()
    email = f"support-{uuid.uuid4().hex[:8]}@example.com"
    async with sessions() as session, session.begin():
        account = await add_channel_account(
            session, tenant=tenant, channel="gmail", external_account_id=email
        )
        session.add(
            GmailMailbox(
                tenant_id=tenant.id, channel_account_id=account.id, email=email, status="needs_reauth"
            )
        )
    result = await cli.arun("channel", "list", "--tenant", tenant.slug)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1].split()[:5] == [
        tenant.slug,
        "gmail",
        email,
        "needs_reauth",
        "token=needs_reauth",
    ]
    async with sessions() as session:
        health = await channel_health(session, tenant.id)
    assert [row["token_state"] for row in health["gmail"]] == ["needs_reauth"]
