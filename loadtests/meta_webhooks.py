"""Webhook acknowledgement, WhatsApp and Instagram side by side (loopback only, no worker).

Starts an embedded PostgreSQL + Redis in a temporary folder, migrates, connects a WhatsApp number and an
Instagram account to one fresh tenant, and runs both real services (``services.whatsapp.main`` and
``services.instagram.main``) under uvicorn, one process each, against the same database. A closed-loop
asyncio client (the approach of ``loadtests/webhook_vs_floor.py``) keeps C requests in flight for T
seconds with unique signed, real-shaped text deliveries (1 in 10 an exact redelivery, which must be
acknowledged and not stored again). Runs alternate WhatsApp / Instagram per round; it prints, per run,
requests, errors, acknowledged requests/s, latency p50/p95/p99 (ms) and new rows stored per second,
then the Instagram/WhatsApp medians. This measures the webhook path only: verify → normalize →
durable insert → enqueue → 200. The client shares the machine, so the figures are a floor.

Usage: ``.venv/bin/python loadtests/meta_webhooks.py [--conc 50 250] [--seconds 10] [--rounds 2]``
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from sqlalchemy import text

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WA_SECRET, IG_SECRET = "load-whatsapp-secret", "load-instagram-secret"


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def whatsapp_body(account: str, i: int) -> bytes:
    wa = f"1555{i % 100000:07d}"
    return json.dumps(
        {
            "object": "whatsapp_business_account",
            "entry": [
                {
                    "id": "102000000000001",
                    "changes": [
                        {
                            "field": "messages",
                            "value": {
                                "messaging_product": "whatsapp",
                                "metadata": {
                                    "display_phone_number": "15550100001",
                                    "phone_number_id": account,
                                },
                                "contacts": [{"profile": {"name": "Load"}, "wa_id": wa}],
                                "messages": [
                                    {
                                        "from": wa,
                                        "id": f"wamid.LOAD{random.getrandbits(64):016x}{i:08d}=",
                                        "timestamp": str(int(time.time())),
                                        "type": "text",
                                        "text": {"body": f"hello {i}"},
                                    }
                                ],
                            },
                        }
                    ],
                }
            ],
        },
        separators=(",", ":"),
    ).encode()


def instagram_body(account: str, i: int) -> bytes:
    now_ms = int(time.time() * 1000)
    return json.dumps(
        {
            "object": "instagram",
            "entry": [
                {
                    "id": account,
                    "time": now_ms,
                    "messaging": [
                        {
                            "sender": {"id": f"1{i % 100000:015d}"},
                            "recipient": {"id": account},
                            "timestamp": now_ms,
                            "message": {
                                "mid": f"aWdfLOAD{random.getrandbits(64):016x}{i:08d}",
                                "text": f"hello {i}",
                            },
                        }
                    ],
                }
            ],
        },
        separators=(",", ":"),
    ).encode()


async def drive(url: str, secret: str, make: Callable[[int], bytes], conc: int, seconds: float) -> dict:
    latencies: list[float] = []
    errors = sent = 0
    previous: list[bytes] = []
    stop = time.perf_counter() + seconds
    limits = httpx.Limits(max_connections=conc, max_keepalive_connections=conc)
    async with httpx.AsyncClient(limits=limits, timeout=30) as client:

        async def worker(k: int) -> None:
            nonlocal errors, sent
            i = k
            while time.perf_counter() < stop:
                raw = random.choice(previous) if previous and random.random() < 0.1 else make(i)
                previous.append(raw)
                del previous[:-200]
                signature = "sha256=" + hmac.new(secret.encode(), raw, hashlib.sha256).hexdigest()
                started = time.perf_counter()
                try:
                    answer = await client.post(
                        url,
                        content=raw,
                        headers={"X-Hub-Signature-256": signature, "Content-Type": "application/json"},
                    )
                    errors += answer.status_code != 200
                except httpx.HTTPError:
                    errors += 1
                latencies.append((time.perf_counter() - started) * 1000)
                sent += 1
                i += conc

        began = time.perf_counter()
        await asyncio.gather(*(worker(k) for k in range(conc)))
        wall = time.perf_counter() - began
    latencies.sort()

    def q(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))]

    return {"n": sent, "errors": errors, "rps": sent / wall, "p50": q(0.5), "p95": q(0.95), "p99": q(0.99)}


async def prepare(database_url: str) -> tuple[str, str, str]:
    from switchboard.db.engine import create_engine, session_factory, session_scope
    from switchboard.tenants import add_channel_account, create_tenant

    engine = create_engine(database_url, pool_size=1)
    try:
        async with session_scope(session_factory(engine)) as session:
            tenant = await create_tenant(
                session, slug=f"load-{random.randint(0, 10**9)}", name="Load Test Shop"
            )
            await add_channel_account(
                session, tenant=tenant, channel="whatsapp", external_account_id="106000000009999"
            )
            await add_channel_account(
                session, tenant=tenant, channel="instagram", external_account_id="17841400000009999"
            )
        return str(tenant.id), "106000000009999", "17841400000009999"
    finally:
        await engine.dispose()


async def stored_per_second(database_url: str, tenant_id: str, channel: str) -> tuple[int, float]:
    """Rows the run stored and the rate (rows over the span of their ``created_at``); clears them."""
    from switchboard.db.engine import create_engine

    engine = create_engine(database_url, pool_size=1)
    try:
        async with engine.connect() as conn:
            count, span = (
                await conn.execute(
                    text(
                        "SELECT count(*), extract(epoch FROM max(created_at) - min(created_at)) FROM messages "
                        "WHERE tenant_id = :t AND channel = :c"
                    ),
                    {"t": tenant_id, "c": channel},
                )
            ).one()
            await conn.execute(text("DELETE FROM messages WHERE tenant_id = :t"), {"t": tenant_id})
            await conn.commit()
        return int(count), (int(count) / float(span)) if span else float("nan")
    finally:
        await engine.dispose()


def start(module: str, port: int, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            f"{module}:create_app",
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


def wait_healthy(url: str, proc: subprocess.Popen) -> None:
    for _ in range(300):
        if proc.poll() is not None:
            raise SystemExit(f"service exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"{url} never answered")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conc", type=int, nargs="+", default=[50, 250])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    sys.path[:0] = [str(ROOT), str(ROOT / "libs")]
    from switchboard.db.migrate import upgrade
    from switchboard.runtime.embedded import EmbeddedPostgres, EmbeddedRedis

    with tempfile.TemporaryDirectory(prefix="sb-meta-load-") as tmp:
        tmp_path = Path(tmp)
        pg, rd = EmbeddedPostgres(tmp_path / "postgres"), EmbeddedRedis(tmp_path / "redis", free_port())
        database_url, redis_url = pg.start(), rd.start()
        procs: list[subprocess.Popen] = []
        try:
            upgrade(database_url)
            tenant_id, wa_account, ig_account = asyncio.run(prepare(database_url))
            env = dict(
                os.environ,
                DATABASE_URL=database_url,
                REDIS_URL=redis_url,
                DATA_DIR=str(tmp_path / "state"),
                META_APP_SECRET=WA_SECRET,
                INSTAGRAM_APP_SECRET=IG_SECRET,
                LOG_LEVEL="WARNING",
                LOG_FORMAT="json",
                INBOUND_DEBOUNCE_S="0",
            )
            wa_port, ig_port = free_port(), free_port()
            procs = [
                start("services.whatsapp.main", wa_port, env),
                start("services.instagram.main", ig_port, env),
            ]
            for port, proc in zip((wa_port, ig_port), procs, strict=True):
                wait_healthy(f"http://127.0.0.1:{port}/healthz", proc)
            channels = {
                "whatsapp": (
                    f"http://127.0.0.1:{wa_port}/webhooks/whatsapp",
                    WA_SECRET,
                    lambda i: whatsapp_body(wa_account, i),
                ),
                "instagram": (
                    f"http://127.0.0.1:{ig_port}/webhooks/instagram",
                    IG_SECRET,
                    lambda i: instagram_body(ig_account, i),
                ),
            }
            for url, secret, make in channels.values():  # warm-up: pools opened, account caches filled
                asyncio.run(drive(url, secret, make, 20, 3))
            asyncio.run(stored_per_second(database_url, tenant_id, "whatsapp"))
            print(
                f"meta webhooks: {os.cpu_count()} CPUs, {args.seconds:g} s per run, closed loop, 1 in 10 a redelivery"
            )
            print(
                f"{'conc':>5} {'channel':>9} {'n':>7} {'err':>4} {'req/s':>7} {'p50':>7} {'p95':>7} {'p99':>7} {'stored/s':>8}"
            )
            for conc in args.conc:
                results: dict[str, list[dict]] = {name: [] for name in channels}
                for _ in range(args.rounds):
                    for name, (url, secret, make) in channels.items():
                        result = asyncio.run(drive(url, secret, make, conc, args.seconds))
                        _, result["stored_s"] = asyncio.run(stored_per_second(database_url, tenant_id, name))
                        results[name].append(result)
                        print(
                            f"{conc:>5} {name:>9} {result['n']:>7} {result['errors']:>4} {result['rps']:>7.0f} "
                            f"{result['p50']:>7.1f} {result['p95']:>7.1f} {result['p99']:>7.1f} {result['stored_s']:>8.0f}"
                        )
                ratio = statistics.median(
                    ig["rps"] / wa["rps"]
                    for wa, ig in zip(results["whatsapp"], results["instagram"], strict=True)
                )
                p99 = statistics.median(
                    ig["p99"] / wa["p99"]
                    for wa, ig in zip(results["whatsapp"], results["instagram"], strict=True)
                )
                print(f"{conc:>5} instagram/whatsapp: req/s {ratio:.2f}, p99 {p99:.2f}")
        finally:
            for proc in procs:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
            rd.stop()
            pg.stop()


if __name__ == "__main__":
    main()
