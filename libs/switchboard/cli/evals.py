"""``switchboard eval`` (the evaluation harness) and ``switchboard feedback issue-key``."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from switchboard.cli.root import app, feedback_app
from switchboard.cli.runner import command_settings, friendly_errors, run_in_session

__all__ = ["eval_command", "issue_feedback_key_command"]


@app.command("eval")
@friendly_errors
def eval_command(
    tenant: Annotated[str, typer.Option(help="Tenant slug or id whose settings and data are copied.")],
    tasks: Annotated[
        str,
        typer.Option(help="Task file (JSONL, one task a line), or `demo` for the demo tenant's bundled set."),
    ],
    repeat: Annotated[int, typer.Option(min=1, help="Run every task this many times.")] = 1,
    model: Annotated[
        str | None,
        typer.Option("--model", help="Only this deployment group of the tenant (`p1`, `p2`...: priority)."),
    ] = None,
    traces: Annotated[
        Path | None,
        typer.Option(help="Where to write the JSONL traces (default DATA_DIR/evals/<tenant>-<time>.jsonl)."),
    ] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Also write the report as JSON here.")
    ] = None,
    keep_copy: Annotated[
        bool, typer.Option("--keep-copy", help="Keep the tenant copy (slug eval-...) for inspection.")
    ] = False,
) -> None:
    """Run evaluation TASKS through the real turn path on a COPY of a tenant, next to a fixed pipeline.

    The copy has the tenant's settings, catalog, orders, stores, tools and knowledge, and no channel accounts: no customer sees anything. Every task runs through the agent (guardrails, tool loop) and through the baseline (one intent call, then retrieve-then-answer or lookup-then-summarize).

    Prints per category: success rate, model calls, latency p50/p95, iteration-cap hits, malformed or unknown tool calls, answers given on traps; and which model ran (the offline model's figures say nothing about a real model). Business tools come from the running MCP tool server (`make run`), else only the built-in tools are offered.

    Example: switchboard eval --tenant demo --tasks demo --repeat 3
    """  # noqa: E501 (one line a paragraph: the terminal wraps --help)
    from switchboard.evals import DEMO_TASKS_PATH, format_report, load_tasks
    from switchboard.runtime.resources import database_url_for

    path = DEMO_TASKS_PATH if tasks == "demo" else Path(tasks)
    loaded = load_tasks(path)
    settings = command_settings()
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    traces_path = traces or settings.data_dir / "evals" / f"{tenant}-{stamp}.jsonl"
    with database_url_for(settings) as url:
        report = asyncio.run(
            _run(
                settings,
                url,
                tenant=tenant,
                tasks=loaded,
                tasks_file=str(path),
                traces_path=traces_path,
                repeat=repeat,
                model_group=model,
                keep_copy=keep_copy,
            )
        )
    typer.echo(format_report(report))
    if json_out is not None:
        json_out.write_text(json.dumps(report.as_dict(), indent=2) + "\n", encoding="utf-8")
        typer.echo(f"report: {json_out}")


async def _run(settings, database_url, **kwargs):  # type: ignore[no-untyped-def]
    # LiteLLM takes seconds to import: only this command pays for it
    from switchboard.agent.simulate import offline_server_if_needed
    from switchboard.crypto import CredentialCipher
    from switchboard.db.engine import create_engine, session_factory
    from switchboard.evals import run_eval
    from switchboard.llm.router import ModelGateway
    from switchboard.tools.mcp_client import McpToolSource

    with offline_server_if_needed(settings) as effective:
        engine = create_engine(database_url, pool_size=4)
        try:
            sessions = session_factory(engine)
            gateway = ModelGateway(
                settings=effective,
                cipher=CredentialCipher(effective.secret("encryption_key").encode()),
                max_concurrent_calls=effective.model_call_concurrency,
            )
            tools = McpToolSource.from_settings(effective, sessions)
            try:
                return await run_eval(effective, sessions, gateway, toolsets=[tools], **kwargs)
            finally:
                await tools.aclose()
        finally:
            await engine.dispose()


@feedback_app.command("issue-key")
@friendly_errors
def issue_feedback_key_command(
    tenant: Annotated[str, typer.Option(help="Tenant slug or id.")],
) -> None:
    """Issue the tenant's feedback app key (replaces the previous one) and print it once.

    The tenant's own app sends it as `Authorization: Bearer <key>` to
    `POST /v1/messages/{id}/feedback`; only its SHA-256 is stored.
    """
    from switchboard.feedback import new_app_key
    from switchboard.tenant_settings import set_section
    from switchboard.tenants import get_tenant

    async def issue(session):  # type: ignore[no-untyped-def]
        row = await get_tenant(session, tenant)
        key, digest = new_app_key()
        set_section(row, "feedback", app_key_sha256=digest)
        session.add(row)
        await session.commit()
        return key

    key = run_in_session(issue, settings=command_settings())
    typer.echo(f"feedback app key (shown once): {key}")
