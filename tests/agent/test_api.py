"""``POST /v1/turns`` over HTTP, the model_server service, and ``switchboard simulate``."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import httpx
from sqlmodel import select
from switchboard.db.models import Conversation, Customer
from switchboard.runtime.services import SERVICES
from switchboard.standins.offline_server import OFFLINE_MARKER, ScriptedResponse

from services.model_server.main import create_app as create_model_server
from tests.utils.agent import deployment, llm_settings, make_conversation, unique_model
from tests.utils.net import free_port
from tests.utils.servers import serve_app


async def test_turns_endpoint_requires_the_service_token_and_answers(
    make_tenant, sessions, settings, offline_model, orchestrator_url
):
    state, url = offline_model
    model = unique_model()
    state.script(model).push(ScriptedResponse(content="Hello from the API"))
    tenant = await make_tenant(llm=llm_settings(deployment(url, model)))
    conv = await make_conversation(sessions, tenant)
    body = conv.request("hi").model_dump(mode="json")
    token = settings.secret("service_token")
    async with httpx.AsyncClient(base_url=orchestrator_url, timeout=30) as client:
        unauthorized = await client.post("/v1/turns", json=body)
        wrong = await client.post("/v1/turns", json=body, headers={"Authorization": "Bearer nope"})
        ok = await client.post("/v1/turns", json=body, headers={"Authorization": f"Bearer {token}"})
        again = await client.post("/v1/turns", json=body, headers={"Authorization": f"Bearer {token}"})
        missing = await client.post(
            "/v1/turns",
            json={**body, "conversation_id": str(uuid.uuid4()), "inbound_message_id": str(uuid.uuid4())},
            headers={"Authorization": f"Bearer {token}"},
        )
        invalid = await client.post(
            "/v1/turns", json={**body, "channel": "fax"}, headers={"Authorization": f"Bearer {token}"}
        )
        openapi = (await client.get("/openapi.json")).json()
    assert (unauthorized.status_code, wrong.status_code) == (401, 401)
    assert ok.status_code == 200
    assert ok.json()["reply"] == "Hello from the API" and ok.json()["silent"] is False
    assert ok.json()["model"] == model
    assert again.json() == ok.json() and len(state.script(model).requests) == 1
    assert missing.status_code == 404
    assert invalid.status_code == 422
    assert openapi["paths"]["/v1/turns"]["post"]["summary"].startswith("Answer one inbound message")


async def test_model_server_service_is_registered_and_serves_the_demo_model():
    spec = next(s for s in SERVICES if s.name == "model_server")
    assert (spec.kind, spec.port_setting) == ("http", "model_server_port")
    with serve_app(create_model_server()) as base:
        async with httpx.AsyncClient(base_url=base) as client:
            health = (await client.get("/healthz")).json()
            answer = await client.post(
                "/v1/chat/completions",
                json={"model": "offline-demo", "messages": [{"role": "user", "content": "hi"}]},
            )
    assert health["service"] == "model_server" and health["status"] == "ok"
    assert answer.json()["choices"][0]["message"]["content"].startswith(OFFLINE_MARKER)


async def test_simulate_command_runs_a_demo_turn_in_process(
    make_tenant, sessions, settings, database_url, cli
):
    tenant = await make_tenant()  # no deployments, no provider key: the offline model answers
    env = {
        "DATABASE_URL": database_url,
        "DATA_DIR": str(settings.data_dir),
        "ORCHESTRATOR_PORT": str(free_port()),  # nothing listens: the turn runs in-process
        "MODEL_SERVER_PORT": str(free_port()),  # nothing listens: simulate starts the offline server
        "OPENAI_API_KEY": "",
        "ANTHROPIC_API_KEY": "",
        "LOG_LEVEL": "WARNING",
    }
    outcome = await cli.arun("simulate", "--tenant", tenant.slug, "Can I talk to a person?", **env)
    assert outcome.exit_code == 0, outcome.output
    lines = dict(line.split(":", 1) for line in outcome.output.strip().splitlines())
    assert lines["reply"].strip().startswith(OFFLINE_MARKER) and "person" in lines["reply"]
    assert lines["tools"].strip() == "escalate_to_human=ok"
    assert "offline-demo" in lines["model"] and "in-process" in lines["model"]
    async with sessions() as session:
        customer = (await session.exec(select(Customer).where(Customer.tenant_id == tenant.id))).one()
        conversation = (
            await session.exec(select(Conversation).where(Conversation.customer_id == customer.id))
        ).one()
    assert customer.external_user_id == "simulate:demo-customer"
    assert conversation.status == "human"


async def test_simulate_reports_an_unknown_tenant(settings, database_url, cli):
    env = {"DATABASE_URL": database_url, "DATA_DIR": str(settings.data_dir), "LOG_LEVEL": "WARNING"}
    outcome = await cli.arun("simulate", "--tenant", "no-such-tenant", "hi", **env)
    assert outcome.exit_code == 2
    assert "tenant not found: no-such-tenant" in outcome.output


async def test_demo_tenant_faq_answers_the_readme_questions_with_the_offline_model(
    make_tenant, sessions, settings, database_url, cli
):
    from switchboard.db.models import KnowledgeSource, Tenant
    from switchboard.llm.lexical import LEXICAL_MODEL_NAME
    from switchboard.seed import DEMO_FAQ_FILENAME, seed_demo_business, seed_demo_knowledge

    tenant = (
        await make_tenant()
    )  # seeded like `make run`'s demo tenant (that one exists only once per database)
    async with sessions() as session, session.begin():
        row = await session.get(Tenant, tenant.id)
        await seed_demo_business(session, row.id)
        await seed_demo_knowledge(session, row)
    async with sessions() as session:
        source = (
            await session.exec(select(KnowledgeSource).where(KnowledgeSource.tenant_id == tenant.id))
        ).one()
    assert (source.filename, source.status, source.embedding_model) == (
        DEMO_FAQ_FILENAME,
        "ready",
        LEXICAL_MODEL_NAME,
    )
    assert source.chunk_count >= 5

    from switchboard.tools.server import ToolServer, create_tools_app

    from tests.utils.servers import serve_app

    mcp_port = free_port()  # the real MCP tool service (search_knowledge_base lives there)
    env = {
        "DATABASE_URL": database_url,
        "DATA_DIR": str(settings.data_dir),
        "ORCHESTRATOR_PORT": str(free_port()),
        "MODEL_SERVER_PORT": str(free_port()),
        "MCP_TOOLS_PORT": str(mcp_port),
        "OPENAI_API_KEY": "",
        "ANTHROPIC_API_KEY": "",
        "LOG_LEVEL": "WARNING",
    }
    expected = {
        "What are your opening hours?": "Monday to Friday 09:00-19:00",
        "What is your returns policy?": "within 30 days of delivery",
        "How long does shipping take?": "Standard delivery takes",
        # the first WhatsApp and Instagram demos of docs/getting-started.md (the payloads' own questions)
        "Hi! Does it come in another color?": "comes in black, chrome and blue",
        "hi, is the blue one back in stock?": "the blue one is back in stock",
        # a Spanish question finds the Spanish answer, quoted in Spanish
        "¿Cuál es su horario?": "abre de lunes a viernes de 09:00 a 19:00",
    }
    async with serve_app(create_tools_app(settings, server=ToolServer()), port=mcp_port):
        outcomes = {
            question: await cli.arun("simulate", "--tenant", tenant.slug, "--new", question, **env)
            for question in expected
        }
        order = await cli.arun(
            "simulate", "--tenant", tenant.slug, "--new", "Where is my order A-1004?", **env
        )
    reply = next(line for line in order.stdout.splitlines() if line.startswith("reply:"))
    # A-1004 is the simulated customer's own order in the demo data, arriving two days from today
    arrives = (datetime.now(UTC) + timedelta(days=2)).date().isoformat()
    assert reply == (
        f"reply:    {OFFLINE_MARKER} Order A-1004 is shipped, with UPS (tracking number 1Z999AA10123456785); "
        f"estimated delivery {arrives}."
    ), order.stdout
    for question, quoted in expected.items():
        outcome = outcomes[question]
        assert outcome.exit_code == 0, outcome.output
        reply = next(line for line in outcome.stdout.splitlines() if line.startswith("reply:"))
        start = "Según nuestros documentos" if question.startswith("¿") else "From our documents"
        assert reply.startswith(f'reply:    {OFFLINE_MARKER} {start}: "'), outcome.stdout
        assert quoted in reply  # the FAQ answer to this very question
        assert "search_knowledge_base=ok" in outcome.stdout
