"""Webhook acknowledgement benchmark for the ``whatsapp`` service (loopback only).

Starts an embedded PostgreSQL + Redis in a temporary folder (or uses ``DATABASE_URL``/``REDIS_URL``),
migrates, connects a WhatsApp number to a fresh tenant, runs the real service with uvicorn on a
free port, then drives ``whatsapp_locustfile.py`` headless at each concurrency and prints:
acknowledgement latency p50/p95/p99 (ms), acknowledged requests/s, failures, and new messages stored
per second (rows in ``messages`` over the run), after a short warm-up (60 posts). No worker runs: this measures the webhook path
(verify → normalize → durable insert → enqueue → 200).

Usage: ``.venv/bin/python loadtests/whatsapp_webhooks.py [--users 50 250] [--seconds 15]``
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import importlib.util
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from sqlalchemy import text

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def prepare(database_url: str) -> tuple[str, str]:
    from switchboard.db.engine import create_engine, session_factory, session_scope
    from switchboard.tenants import add_channel_account, create_tenant

    engine = create_engine(database_url, pool_size=1)
    try:
        async with session_scope(session_factory(engine)) as session:
            tenant = await create_tenant(
                session, slug=f"load-{random.randint(0, 10**9)}", name="Load Test Shop"
            )
            phone_number_id = str(random.randint(10**14, 10**15 - 1))
            await add_channel_account(
                session, tenant=tenant, channel="whatsapp", external_account_id=phone_number_id
            )
        return str(tenant.id), phone_number_id
    finally:
        await engine.dispose()


async def stored_rate(database_url: str, tenant_id: str) -> tuple[int, float]:
    from switchboard.db.engine import create_engine

    engine = create_engine(database_url, pool_size=1)
    try:
        async with engine.connect() as conn:
            row = (
                await conn.execute(
                    text(
                        "SELECT count(*), extract(epoch FROM max(created_at) - min(created_at)) FROM messages WHERE tenant_id = :t"
                    ),
                    {"t": tenant_id},
                )
            ).one()
            await conn.execute(text("DELETE FROM messages WHERE tenant_id = :t"), {"t": tenant_id})
            await conn.commit()
        return int(row[0]), float(row[1] or 0.0)
    finally:
        await engine.dispose()


async def warm_up(host: str, secret: str, phone_number_id: str, requests: int = 60) -> None:
    """Post ``requests`` webhooks, 20 at a time, before measuring (a cold process opens its pools first)."""
    sys.path.insert(0, str(ROOT / "libs"))
    import json

    from switchboard.channels.whatsapp.cli import build_text_webhook, post_signed

    limiter = asyncio.Semaphore(20)
    async with httpx.AsyncClient(timeout=30) as client:

        async def one(i: int) -> None:
            body = build_text_webhook(phone_number_id=phone_number_id, wa_id=f"1999{i:07d}", text="warm-up")
            async with limiter:
                await post_signed(client, host + "/webhooks/whatsapp", json.dumps(body).encode(), secret)

        await asyncio.gather(*(one(i) for i in range(requests)))


def run_locust(users: int, seconds: int, host: str, env: dict[str, str], out: Path) -> dict[str, str]:
    prefix = out / f"u{users}"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "locust",
            "-f",
            str(HERE / "whatsapp_locustfile.py"),
            "--headless",
            "-u",
            str(users),
            "-r",
            str(min(users, 50)),
            "-t",
            f"{seconds}s",
            "--host",
            host,
            "--csv",
            str(prefix),
            "--only-summary",
            "--loglevel",
            "WARNING",
            "--stop-timeout",
            "5",
        ],
        env=env,
        check=False,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    with open(f"{prefix}_stats.csv") as fh:
        rows = list(csv.DictReader(fh))
    return next(r for r in rows if r["Name"] == "Aggregated")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, nargs="+", default=[50, 250])
    parser.add_argument("--seconds", type=int, default=15)
    args = parser.parse_args()
    if importlib.util.find_spec("locust") is None:
        sys.exit(
            "Locust is not installed: it is in the `load` group, `.venv/bin/uv sync --frozen --inexact --group load`"
        )
    sys.path.insert(0, str(ROOT))
    from switchboard.db.migrate import upgrade
    from switchboard.runtime.embedded import EmbeddedPostgres, EmbeddedRedis

    with tempfile.TemporaryDirectory(prefix="sb-load-") as tmp:
        tmp_path = Path(tmp)
        pg = None if os.environ.get("DATABASE_URL") else EmbeddedPostgres(tmp_path / "postgres")
        rd = None if os.environ.get("REDIS_URL") else EmbeddedRedis(tmp_path / "redis", free_port())
        database_url = os.environ.get("DATABASE_URL") or pg.start()  # type: ignore[union-attr]
        redis_url = os.environ.get("REDIS_URL") or rd.start()  # type: ignore[union-attr]
        service = None
        try:
            upgrade(database_url)
            tenant_id, phone_number_id = asyncio.run(prepare(database_url))
            port = free_port()
            secret = "load-test-secret"
            env = dict(
                os.environ,
                DATABASE_URL=database_url,
                REDIS_URL=redis_url,
                DATA_DIR=str(tmp_path / "state"),
                META_APP_SECRET=secret,
                LOG_LEVEL="WARNING",
                LOG_FORMAT="json",
                INBOUND_DEBOUNCE_S="0",
                LOADTEST_APP_SECRET=secret,
                LOADTEST_PHONE_NUMBER_ID=phone_number_id,
            )
            service = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "uvicorn",
                    "services.whatsapp.main:create_app",
                    "--factory",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--log-level",
                    "warning",
                    "--no-access-log",
                ],
                cwd=ROOT,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            host = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    if httpx.get(host + "/healthz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.2)
            asyncio.run(warm_up(host, secret, phone_number_id))  # open DB/Redis pools, fill the account cache
            asyncio.run(stored_rate(database_url, tenant_id))  # (clears the warm-up rows)
            print(
                f"whatsapp webhook benchmark: {os.cpu_count()} CPUs, {args.seconds} s per run, loopback {host}"
            )
            print(
                f"{'users':>5} {'requests':>8} {'fail':>5} {'req/s':>7} {'p50 ms':>7} {'p95 ms':>7} {'p99 ms':>7} {'max ms':>7} {'stored':>7} {'stored/s':>8}"
            )
            for users in args.users:
                stats = run_locust(users, args.seconds, host, env, tmp_path)
                count, span_s = asyncio.run(stored_rate(database_url, tenant_id))
                rate = count / span_s if span_s > 0 else float("nan")
                print(
                    f"{users:>5} {stats['Request Count']:>8} {stats['Failure Count']:>5} {float(stats['Requests/s']):>7.1f} "
                    f"{stats['50%']:>7} {stats['95%']:>7} {stats['99%']:>7} {float(stats['Max Response Time']):>7.0f} {count:>7} {rate:>8.1f}"
                )
        finally:
            if service is not None:
                service.terminate()
                service.wait(10)
            if rd is not None:
                rd.stop()
            if pg is not None:
                pg.stop()


if __name__ == "__main__":
    main()
