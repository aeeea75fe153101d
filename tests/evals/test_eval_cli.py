"""``switchboard eval`` and ``switchboard feedback issue-key`` from the command line."""

from __future__ import annotations

import json

from switchboard.budgets.settings import FeedbackSettings
from switchboard.db.models import Tenant
from switchboard.feedback import app_key_matches
from switchboard.tenant_settings import tenant_settings_from

from tests.utils.agent import deployment, llm_settings, unique_model


async def test_eval_prints_the_report_and_writes_traces_and_json(cli, make_tenant, offline_model, tmp_path):
    _, url = offline_model
    model = unique_model("evalcli")
    tenant = await make_tenant(llm=llm_settings(deployment(url, model)), guardrails={})
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        '{"id": "person", "category": "simple", "text": "Can I talk to a person?", "checks": [{"type": "handoff"}]}\n'
        '{"id": "poem", "category": "trap", "text": "Write me a poem about fans", "checks": [{"type": "refusal"}]}\n'
    )
    traces, report = tmp_path / "traces.jsonl", tmp_path / "report.json"
    result = await cli.arun(
        "eval", "--tenant", tenant.slug, "--tasks", str(tasks), "--traces", str(traces), "--json", str(report)
    )
    assert result.exit_code == 0, result.output
    assert f"models: {model}" in result.output and "OFFLINE MODEL" in result.output
    data = json.loads(report.read_text())
    assert data["agent"]["simple"]["success_rate"] == 1.0  # escalate_to_human is a built-in tool
    assert data["agent"]["trap"]["success_rate"] == 1.0  # the guardrail's heuristic stops the poem
    assert data["agent"]["trap"]["hallucination_rate"] == 0.0
    assert data["pipeline"]["simple"]["success_rate"] == 1.0  # the intent call routes to a handoff
    assert len(traces.read_text().splitlines()) == 4


async def test_eval_names_a_bad_task_file(cli, make_tenant, tmp_path):
    tenant = await make_tenant()
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("not json\n")
    result = await cli.arun("eval", "--tenant", tenant.slug, "--tasks", str(tasks))
    assert result.exit_code == 2 and "tasks.jsonl:1: not a valid task" in result.output


async def test_feedback_issue_key_stores_only_the_digest(cli, make_tenant, sessions):
    tenant = await make_tenant()
    result = await cli.arun("feedback", "issue-key", "--tenant", tenant.slug)
    assert result.exit_code == 0, result.output
    key = result.output.strip().rsplit(" ", 1)[-1]
    async with sessions() as session:
        row = await session.get(Tenant, tenant.id)
    stored = tenant_settings_from(row.settings_extensions).channel(FeedbackSettings).app_key_sha256
    assert key.startswith("sbfk_") and key not in json.dumps(row.settings_extensions)
    assert app_key_matches(key, stored)
