"""Gmail: sync throughput (mails/s through the real pipeline) and push acknowledgement latency.

Self-contained: starts an embedded PostgreSQL and Redis in a temporary folder (like the tests), the
Gmail service with its Gmail API sandbox on a free port, connects a sandbox mailbox through the real
OAuth code flow, then:

1. **Sync throughput**: ``--mails`` mails from distinct customers arrive in the sandbox mailbox; one
   ``sync_gmail_mailbox`` job runs on the real background worker (ARQ, burst): ``history.list``
   pages, ``messages.get`` per mail, MIME → clean text, safety checks, the durable inbound insert
   and one chat job per mail. Printed: mails stored per second (wall time of the burst), and that
   every mail was stored once. The agent's answer is not part of it (the chat queue is not run).
2. **Push acknowledgement**: ``--pushes`` Pub/Sub push envelopes (distinct message ids, the push
   secret in the URL) posted to ``/webhooks/gmail`` over HTTP, ``--concurrency`` at a time:
   verification, the durable insert of the notification and the enqueue of a sync before the 200.
   Printed: p50/p95/max in ms.

Usage: ``.venv/bin/python loadtests/gmail_sync.py [--mails 300] [--pushes 300] [--concurrency 8]``
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "libs"))
sys.path.insert(0, str(ROOT))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def serve(app, port: int):  # type: ignore[no-untyped-def]
    import uvicorn

    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code < 500:
                return server, thread
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError("the Gmail service did not start")


async def run(args: argparse.Namespace, database_url: str, redis_url: str, data_dir: Path, port: int) -> None:
    from arq.worker import Worker
    from sqlmodel import func, select
    from switchboard.channels.gmail.client import GmailClient
    from switchboard.channels.gmail.jobs import enqueue_sync
    from switchboard.channels.gmail.mailboxes import (
        code_from_answer,
        finish_authorization,
        start_authorization,
    )
    from switchboard.channels.gmail.oauth import ClientSecrets
    from switchboard.crypto import CredentialCipher
    from switchboard.db.engine import create_engine, session_factory
    from switchboard.db.models import Message
    from switchboard.queue import Queue
    from switchboard.runtime.resources import open_resources
    from switchboard.settings import load_settings
    from switchboard.tenants import create_tenant
    from switchboard.worker import WORKER_SETTINGS_BUILDERS

    from services.gmail.main import create_app

    settings = load_settings(
        database_url=database_url,
        redis_url=redis_url,
        data_dir=data_dir,
        gmail_port=port,
        log_level="WARNING",
        inbound_debounce_s=0.0,
        _env_file=None,
    )
    server, thread = await asyncio.to_thread(serve, create_app(settings), port)
    engine = create_engine(database_url, pool_size=4)
    sessions = session_factory(engine)
    api = settings.resolved_gmail_api_base_url
    mailbox = "support-load@example.com"
    try:
        async with sessions() as session, session.begin():
            tenant = await create_tenant(
                session, slug=f"gmail-load-{uuid.uuid4().hex[:6]}", name="Gmail load"
            )
        cipher = CredentialCipher(settings.secret("encryption_key").encode())
        auth = start_authorization(
            cipher=cipher,
            auth_url=settings.resolved_gmail_auth_url,
            scopes=settings.gmail_oauth_scopes,
            tenant_id=tenant.id,
            secrets=ClientSecrets("load.apps.googleusercontent.com", "GOCSPX-load"),
            redirect_uri="http://127.0.0.1:1/cb",
            login_hint=mailbox,
        )
        control = {
            "Authorization": f"Bearer {settings.secret('admin_token')}"
        }  # the sandbox's control endpoints
        async with httpx.AsyncClient(timeout=30) as http:
            location = (await http.get(auth.url)).headers["location"]
            code = code_from_answer(location, state=auth.state)
            gmail = GmailClient(api, settings.resolved_gmail_token_url)
            connected = await finish_authorization(
                sessions=sessions,
                cipher=cipher,
                client=gmail,
                tenant_id=tenant.id,
                state=auth.state,
                code=code,
            )
            await gmail.aclose()

            # --- 1. sync throughput -------------------------------------------------------------
            for i in range(args.mails):
                response = await http.post(
                    api + "/_control/deliver",
                    headers=control,
                    json={
                        "to": mailbox,
                        "from": f"customer-{i}@example.net",
                        "subject": f"Order {1000 + i}",
                        "text": f"Hello,\n\nwhere is my order {1000 + i}? It was due on Monday.\n\nThanks\n",
                        "html": f"<p>Hello,</p><p>where is my order <b>{1000 + i}</b>? It was due on Monday.</p>",
                    },
                )
                response.raise_for_status()
            async with open_resources(settings) as resources:
                await enqueue_sync(resources.redis, connected.account_id, reason="load")
            cls = WORKER_SETTINGS_BUILDERS[Queue.background](settings)
            kwargs = {k: v for k, v in vars(cls).items() if not k.startswith("__")}
            kwargs.pop("cron_jobs", None)
            worker = Worker(**kwargs, burst=True, poll_delay=0.01, handle_signals=False)
            started = time.perf_counter()
            try:
                await worker.main()
            finally:
                await worker.close()
            elapsed = time.perf_counter() - started
            async with sessions() as session:
                stored = (
                    await session.exec(
                        select(func.count())
                        .select_from(Message)
                        .where(Message.tenant_id == tenant.id, Message.direction == "inbound")
                    )
                ).one()
            print(f"gmail sync: {args.mails} mails, one sync job on the background worker")
            print(f"  stored {stored}/{args.mails} in {elapsed:.2f} s: {stored / elapsed:.1f} mails/s")

            # --- 2. push acknowledgement --------------------------------------------------------
            url = f"http://127.0.0.1:{port}/webhooks/gmail?token={settings.secret('gmail_push_secret')}"
            data = base64.b64encode(json.dumps({"emailAddress": mailbox, "historyId": 1}).encode()).decode()
            limiter = asyncio.Semaphore(args.concurrency)
            acks: list[float] = []
            statuses: dict[int, int] = {}

            async def push(i: int) -> None:
                body = {
                    "message": {"data": data, "messageId": f"load-{uuid.uuid4().hex}"},
                    "subscription": "projects/p/subscriptions/gmail",
                }
                async with limiter:
                    t0 = time.perf_counter()
                    response = await http.post(url, json=body)
                    acks.append((time.perf_counter() - t0) * 1000)
                    statuses[response.status_code] = statuses.get(response.status_code, 0) + 1

            for i in range(min(10, args.pushes)):  # warm-up: connections, certs cache, first queries
                await push(i)
            acks.clear()
            statuses.clear()
            await asyncio.gather(*(push(i) for i in range(args.pushes)))
            print(f"gmail push: {args.pushes} pushes, concurrency {args.concurrency}, statuses {statuses}")
            print(
                f"  ack ms: p50 {statistics.median(acks):.1f}  p95 {pct(acks, 0.95):.1f}  max {max(acks):.1f}"
            )
    finally:
        server.should_exit = True
        await asyncio.to_thread(thread.join, 10)
        await engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mails", type=int, default=300)
    parser.add_argument("--pushes", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()

    import socket

    from switchboard.db.migrate import upgrade
    from switchboard.runtime.embedded import EmbeddedPostgres, EmbeddedRedis

    def free_port() -> int:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return sock.getsockname()[1]

    with tempfile.TemporaryDirectory(prefix="gmail-load-") as folder:
        pg = EmbeddedPostgres(Path(folder) / "postgres")
        redis = EmbeddedRedis(Path(folder) / "redis", free_port())
        try:
            url = pg.start()
            upgrade(url)
            asyncio.run(run(args, url, redis.start(), Path(folder) / "state", free_port()))
        finally:
            redis.stop()
            pg.stop()


if __name__ == "__main__":
    main()
