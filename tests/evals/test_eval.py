"""``switchboard eval``: the demo task set through the real turn path (offline model, real MCP tools) on
a copy of a demo-like tenant, next to the pipeline baseline."""

from __future__ import annotations

import json

import pytest
from sqlmodel import select
from switchboard.db.models import Customer, Outbox, Product, Tenant
from switchboard.evals import DEMO_TASKS_PATH, format_report, load_tasks, run_eval
from switchboard.evals.tasks import EvalTask, Observation, TasksRejected, run_checks
from switchboard.seed import seed_demo_business, seed_demo_knowledge
from switchboard.tenant_settings import set_section
from switchboard.tools.mcp_client import McpToolSource

from tests.utils.agent import deployment, llm_settings, unique_model


@pytest.fixture
async def demo_like(make_tenant, sessions, offline_model):  # type: ignore[no-untyped-def]
    """A tenant seeded like ``make run``'s demo (catalog, orders, stores, FAQ), answering through an
    unscripted offline deployment (the demo behaviour), with the guardrails on as in production."""
    _, url = offline_model
    model = unique_model("evaldemo")
    tenant = await make_tenant("Demo Shop", llm=llm_settings(deployment(url, model)), guardrails={})
    async with sessions() as session, session.begin():
        row = await session.get(Tenant, tenant.id)
        set_section(
            row, "agent", name="Sam", instructions="You are Sam, the friendly support agent of Demo Shop."
        )
        session.add(row)
        await seed_demo_business(session, tenant.id)
        await seed_demo_knowledge(session, row)
    return tenant, model


async def test_the_demo_task_set_runs_on_a_copy_and_reports_per_category(
    demo_like, sessions, gateway, settings, mcp_url, tmp_path
):
    tenant, model = demo_like
    tasks = load_tasks(DEMO_TASKS_PATH)
    assert {t.category for t in tasks} == {"simple", "compound", "trap"}
    tools = McpToolSource(
        url=mcp_url,
        token=settings.secret("mcp_service_token"),
        capability_key=settings.secret("tool_capability_key"),
        sessions=sessions,
    )
    traces = tmp_path / "traces.jsonl"
    try:
        report = await run_eval(
            settings,
            sessions,
            gateway,
            tenant=tenant.slug,
            tasks=tasks,
            tasks_file=str(DEMO_TASKS_PATH),
            traces_path=traces,
            toolsets=[tools],
        )
    finally:
        await tools.aclose()
    print(format_report(report))

    assert report.models == [model] and report.offline_model is True
    assert "OFFLINE MODEL" in format_report(report)
    assert {c: s.runs for c, s in report.agent.items()} == {"simple": 7, "compound": 3, "trap": 5}
    assert {c: s.runs for c, s in report.pipeline.items()} == {"simple": 7, "compound": 3, "trap": 5}
    # the demo model searches the FAQ and looks up an order it is told the number of: the four FAQ
    # questions, the order and the handoff pass; the price needs a catalog lookup it never makes
    assert report.agent["simple"].success_rate == pytest.approx(6 / 7, abs=1e-3)
    # the pipeline routes the price question to its lookup too
    assert report.pipeline["simple"].success_rate > report.agent["simple"].success_rate
    assert report.agent["compound"].success_rate == 0.0
    # traps: the FAQ search finds nothing for the drone, the CEO or the discount, the other customer's
    # order is "not found" for this customer, the guardrail stops the prompt extraction; the pipeline shows the
    # other customer's "not found" lookup and the guardrail-less answer to the extraction
    assert (report.agent["trap"].trap_answers, report.agent["trap"].hallucination_rate) == (0, 0.0)
    assert report.pipeline["trap"].trap_answers >= 1
    assert report.agent["simple"].model_calls_mean >= 2  # the input guardrail, then the loop
    assert report.pipeline["simple"].model_calls_mean <= 2
    assert report.agent["simple"].latency_p95_ms >= report.agent["simple"].latency_p50_ms > 0
    assert all(s.iteration_cap_hits == 0 and s.malformed_tool_calls == 0 for s in report.agent.values())

    lines = [json.loads(line) for line in traces.read_text().splitlines()]
    assert len(lines) == 2 * len(tasks)
    by_key = {(r["runner"], r["task_id"]): r for r in lines}
    assert by_key[("agent", "s-returns")]["passed"] is True
    assert by_key[("agent", "s-returns")]["tool_calls"][0]["name"] == "search_knowledge_base"
    assert by_key[("agent", "s-returns")]["guardrails"]["input"]["checker"] == "offline_heuristic"
    assert by_key[("pipeline", "s-order")]["intent"] == "order"
    assert by_key[("pipeline", "s-order")]["tool_calls"] == [
        {"name": "check_order_status", "arguments": {"order_number": "A-1004"}}
    ]
    assert by_key[("pipeline", "s-order")]["passed"] is True  # the copy's customer owns A-1004
    assert [c["name"] for c in by_key[("agent", "s-order")]["tool_calls"]] == ["check_order_status"]
    assert by_key[("agent", "s-order")]["passed"] is True
    assert by_key[("agent", "t-prompt")]["flags"] == ["input_blocked"]
    assert (
        by_key[("agent", "t-prompt")]["passed"] is True and by_key[("agent", "t-prompt")]["model_calls"] == 1
    )

    # the copy is gone, the original untouched, and nothing was queued for any channel
    async with sessions() as session:
        slugs = [t.slug for t in (await session.exec(select(Tenant))).all()]
        assert not [s for s in slugs if s.startswith(f"eval-{tenant.slug}")]
        products = (await session.exec(select(Product).where(Product.tenant_id == tenant.id))).all()
        assert len(products) == 5
        assert (await session.exec(select(Customer).where(Customer.tenant_id == tenant.id))).all() == []
        assert (await session.exec(select(Outbox).where(Outbox.tenant_id == tenant.id))).all() == []


def test_checks_score_what_they_say():
    task = EvalTask.model_validate(
        {
            "id": "x",
            "category": "compound",
            "text": "q",
            "checks": [
                {"type": "contains", "values": ["shipped"]},
                {"type": "numeric", "value": 89.9, "tolerance": 0.01},
                {
                    "type": "tool_called",
                    "name": "check_order_status",
                    "arguments": {"order_number": "a-1004"},
                },
            ],
        }
    )
    good = Observation(
        reply="Your order has Shipped; it cost 89,90 USD.",
        tool_calls=[{"name": "check_order_status", "arguments": {"order_number": "A-1004"}}],
    )
    assert [c["passed"] for c in run_checks(task, good)] == [True, True, True]
    bad = Observation(reply="It cost 99.90.", tool_calls=[{"name": "lookup_product", "arguments": {}}])
    assert [c["passed"] for c in run_checks(task, bad)] == [False, False, False]
    refusal = EvalTask.model_validate(
        {"id": "t", "category": "trap", "text": "q", "checks": [{"type": "refusal"}]}
    )
    assert run_checks(refusal, Observation(reply="Sorry, I don't know that."))[0]["passed"] is True
    assert run_checks(refusal, Observation(reply="It is 12 USD."))[0]["passed"] is False
    assert run_checks(refusal, Observation(reply="ok", handed_off=True))[0]["passed"] is True


def test_a_bad_task_line_is_named(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text(
        '{"id": "a", "category": "simple", "text": "hi", "checks": [{"type": "refusal"}]}\n{"id": "b"}\n'
    )
    with pytest.raises(TasksRejected, match="tasks.jsonl:2"):
        load_tasks(path)
