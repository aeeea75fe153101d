"""End-to-end latency: signed webhook → worker → orchestrator (offline model) → Graph sandbox send.

Run against a running system (``make run`` / ``switchboard run``; same environment and DATA_DIR):
posts ``--messages`` text webhooks from distinct customers of the demo tenant, ``--concurrency`` at a
time, and waits for each reply to reach the Graph API sandbox. Prints the webhook acknowledgement and
webhook-to-send times (p50/p95/max, ms). Note that the worker waits ``INBOUND_DEBOUNCE_S`` (default
2 s) before answering, to coalesce bursts; run the system with ``INBOUND_DEBOUNCE_S=0`` to see the
pipeline alone.

Usage: ``.venv/bin/python loadtests/whatsapp_e2e.py [--messages 40] [--concurrency 8] [--tenant demo]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def run(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT / "libs"))
    from sqlmodel import select
    from switchboard.channels.whatsapp.cli import _run_db, build_text_webhook, post_signed
    from switchboard.db.models import ChannelAccount
    from switchboard.settings import load_settings
    from switchboard.tenants import get_tenant

    settings = load_settings()

    async def find(session):  # type: ignore[no-untyped-def]
        tenant = await get_tenant(session, args.tenant)
        account = (
            await session.exec(
                select(ChannelAccount).where(
                    ChannelAccount.tenant_id == tenant.id, ChannelAccount.channel == "whatsapp"
                )
            )
        ).first()
        return account.external_account_id

    phone_number_id = await asyncio.to_thread(_run_db, find)
    webhook = settings.service_url(settings.whatsapp_port) + "/webhooks/whatsapp"
    sandbox = settings.whatsapp_sandbox_url + "/_control/sent"  # the demo number is on the sandbox
    secret = settings.secret("meta_app_secret")
    acks: list[float] = []
    e2e: list[float] = []
    pending: dict[str, float] = {}
    run_id = int(time.time()) % 100000
    control = {"Authorization": f"Bearer {settings.secret('admin_token')}"}  # the sandbox's control endpoints
    async with httpx.AsyncClient(timeout=30) as client:
        after = (await client.get(sandbox, headers=control)).json()["last_seq"]
        limiter = asyncio.Semaphore(args.concurrency)

        async def send(i: int) -> None:
            wa_id = f"1777{run_id:05d}{i:03d}"
            body = build_text_webhook(
                phone_number_id=phone_number_id,
                wa_id=wa_id,
                text=f"Load test question {i}: do you ship abroad?",
            )
            raw = json.dumps(body, separators=(",", ":")).encode()
            async with limiter:
                started = time.perf_counter()
                response = await post_signed(client, webhook, raw, secret)
                acks.append((time.perf_counter() - started) * 1000)
                if response.status_code == 200:
                    pending[wa_id] = started

        async def watch() -> None:
            nonlocal after
            deadline = time.perf_counter() + args.timeout
            while time.perf_counter() < deadline and (pending or len(acks) < args.messages):
                data = (await client.get(sandbox, params={"after": after}, headers=control)).json()
                now = time.perf_counter()
                for message in data["messages"]:
                    after = message["seq"]
                    started = pending.pop(message["to"], None)
                    if started is not None:
                        e2e.append((now - started) * 1000)
                await asyncio.sleep(0.05)

        watcher = asyncio.create_task(watch())
        await asyncio.gather(*(send(i) for i in range(args.messages)))
        await watcher
    print(
        f"whatsapp end-to-end: {args.messages} messages, concurrency {args.concurrency}, tenant {args.tenant}"
    )
    print(
        f"  webhook ack  ms: p50 {statistics.median(acks):.1f}  p95 {pct(acks, 0.95):.1f}  max {max(acks):.1f}"
    )
    if e2e:
        print(
            f"  webhook→send ms: p50 {statistics.median(e2e):.0f}  p95 {pct(e2e, 0.95):.0f}  max {max(e2e):.0f}  answered {len(e2e)}/{args.messages}"
        )
    else:
        print("  no replies reached the sandbox (is the worker running and the orchestrator healthy?)")


def main() -> None:
    parser = argparse.ArgumentParser(description="WhatsApp end-to-end latency against a running system")
    parser.add_argument("--messages", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--tenant", default="demo")
    parser.add_argument("--timeout", type=float, default=120.0)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
