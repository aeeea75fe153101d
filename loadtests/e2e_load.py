"""End to end under load: 250 customers over WhatsApp, Instagram and Gmail against ``switchboard run``.

One command starts the whole system from this tree (``switchboard run`` with the 94xx ports of the
load block and ``DATA_DIR=/tmp/load-data``, ``MODEL_SERVER_CONTROL=true``), connects the demo tenant's
Gmail mailbox through the sandbox's OAuth flow, stores the media the scenario refers to in the Graph and
Instagram sandboxes, sets the offline model's latency through the model server's ``/control`` hooks
(``--model-latency 0``: none; ``1-3``: every model call waits a uniform 1-3 s), then drives the Locust
scenario ``e2e_locustfile.py`` headless (text, media, button/list taps, redeliveries, bursts inside the
debounce window; see its docstring) for ``--duration`` seconds, waits for the backlog to drain, and stops
the system (SIGINT). With ``--attach`` it uses a system that is already running with the same
environment instead, and leaves it running.

It prints:

* webhook acknowledgement p50/p95/p99 (ms) per channel (every post: new, burst, redelivery; Gmail: the
  Pub/Sub push);
* message → reply-sent p50/p95 (s) per channel: the sandbox's record time of the first part of a reply
  minus the time the answered message was posted (a burst: its newest message, the one the product
  answers; that includes the ``INBOUND_DEBOUNCE_S`` wait, 2 s by default);
* queue depth over time (ready and deferred jobs of the chat and background ARQ queues, sampled every
  0.5 s with :func:`switchboard.queue.depth.queue_depths`), a summary and a PNG plot at a printed path;
* the two numbers that must be zero, counted by :mod:`e2e_accounting` from the sandboxes' send logs
  keyed by the message each reply answers: **customer messages without a reply** (per turn: a reply
  covers the message it answers and the older ones coalesced into it) and **replies sent twice**;
  apart from those, **handed to a person**: messages with no AI reply in a conversation already in human
  mode (the customer had the holding reply; answered by design, not lost), and a Gmail message over the
  thread's automatic reply cap (``auto_reply_cap`` replies in ``auto_reply_window_s``: that message goes
  to a person instead of the model, by design).

Usage::

    .venv/bin/uv sync --frozen --inexact --group load
    .venv/bin/python loadtests/e2e_load.py --users 250 --duration 60 --model-latency 0
    .venv/bin/python loadtests/e2e_load.py --users 250 --duration 60 --model-latency 1-3
    .venv/bin/python loadtests/e2e_load.py --quick            # 250 users, 20 s, under ~2 min

Exit status 1 when a message went without a reply or a reply was sent twice.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import importlib.util
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT / "libs")]


def _accounting():  # type: ignore[no-untyped-def]
    """``e2e_accounting.py`` beside this file (loadtests/ is no package; the test loads it the same way)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("e2e_accounting", HERE / "e2e_accounting.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["e2e_accounting"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


_acc = _accounting()
Reply, account, percentile, sent_from_records = (
    _acc.Reply,
    _acc.account,
    _acc.percentile,
    _acc.sent_from_records,
)

PORTS = {
    "ORCHESTRATOR_PORT": 9400,
    "WHATSAPP_PORT": 9401,
    "INSTAGRAM_PORT": 9402,
    "GMAIL_PORT": 9403,
    "MCP_TOOLS_PORT": 9404,
    "MODEL_SERVER_PORT": 9405,
    "WORKER_METRICS_PORT": 9406,
    "WORKER_BACKGROUND_METRICS_PORT": 9407,
    "CONSOLE_PORT": 9408,
    "EMBEDDED_REDIS_PORT": 9409,
    "WEB_PORT": 9410,
}
MODEL = "offline-demo"  # switchboard.llm.config.OFFLINE_DEMO_MODEL: the demo tenant's deployment


def system_env(args: argparse.Namespace) -> dict[str, str]:
    env = {k: str(v - 9400 + args.port_base) for k, v in PORTS.items()}
    env |= {
        "DATA_DIR": args.data_dir,
        "MODEL_SERVER_CONTROL": "true",
        "LOG_LEVEL": "WARNING",
        # all 250 customers belong to the one demo tenant: its fairness limit (600 a minute) would
        # defer most of them and measure the limit, not the pipeline
        "TENANT_RATE_LIMIT": str(args.tenant_rate_limit),
    }
    return env


def start_system(env: dict[str, str], log_path: Path) -> subprocess.Popen:
    log = log_path.open("ab")
    return subprocess.Popen(
        [str(ROOT / ".venv/bin/switchboard"), "run"],
        cwd=ROOT,
        env=dict(os.environ, **env),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def stop_system(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(90)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def wait_ready(settings: Any, proc: subprocess.Popen | None, timeout_s: float = 400) -> dict[str, Any]:
    """Wait until every service answers healthy (the probes of ``switchboard status``); return ``run.json``.

    (``switchboard run`` writes ``run.json`` after its own health wait even when that wait timed out, as
    it can on a loaded machine, so the file alone does not mean ready.)
    """
    from switchboard.runtime.resources import live_run_state
    from switchboard.runtime.services import SERVICES
    from switchboard.runtime.supervisor import check_service_health

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"switchboard run exited with {proc.returncode}; see its log")
        state = live_run_state(settings)
        redis_url = os.environ.get("REDIS_URL") or (state or {}).get("embedded_redis_url")
        if state and all(check_service_health(spec, settings, redis_url, 5.0)[0] for spec in SERVICES):
            return state
        time.sleep(2)
    raise SystemExit(f"switchboard run not healthy after {timeout_s:g} s")


def connect_gmail(env: dict[str, str], tmp: Path) -> None:
    """Connect ``support@example.com`` to the demo tenant through the sandbox's consent (idempotent)."""
    secrets = tmp / "client_secret.json"
    secrets.write_text(
        json.dumps(
            {
                "installed": {
                    "client_id": "load.apps.googleusercontent.com",
                    "client_secret": "load-secret",
                    "redirect_uris": ["http://127.0.0.1"],
                }
            }
        )
    )
    done = subprocess.run(
        [
            str(ROOT / ".venv/bin/switchboard"),
            "channel",
            "add-gmail",
            "--tenant",
            "demo",
            "--client-secrets",
            str(secrets),
            "--loopback",
            "--timeout",
            "60",
        ],
        cwd=ROOT,
        env=dict(os.environ, **env),
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise SystemExit(f"add-gmail failed: {done.stdout}\n{done.stderr}")


async def prepare(
    client: httpx.AsyncClient, settings: Any, run: str, latency: str, model_calls: int
) -> dict[str, str]:
    """Media in the sandboxes, the model's latency script; returns the scenario's ``LOADTEST_*`` values."""
    wa, ig = settings.whatsapp_sandbox_url, settings.instagram_sandbox_url
    image_id, audio_id = f"{run}00001", f"{run}00002"
    for media_id, data, mime in (
        (image_id, b"\xff\xd8\xffjpeg", "image/jpeg"),
        (audio_id, b"SWITCHBOARD-TRANSCRIPT: where is my order", "audio/ogg"),
    ):
        (
            await client.put(f"{wa}/_control/media/{media_id}", content=data, headers={"content-type": mime})
        ).raise_for_status()
    assets = {"image": f"load-{run}-image", "audio": f"load-{run}-audio"}
    (await client.put(f"{ig}/_control/cdn/{assets['image']}", content=b"\xff\xd8\xffjpeg")).raise_for_status()
    (
        await client.put(
            f"{ig}/_control/cdn/{assets['audio']}", content=b"SWITCHBOARD-TRANSCRIPT: do you ship abroad"
        )
    ).raise_for_status()
    control = settings.model_server_url + f"/control/{MODEL}"
    (await client.delete(control)).raise_for_status()
    if latency != "0":
        low, high = (float(x) for x in latency.split("-"))
        responses = [
            {"kind": "demo", "latency_s": round(random.uniform(low, high), 3)} for _ in range(model_calls)
        ]
        script = {
            "responses": responses,
            "default": {"kind": "demo", "latency_s": (low + high) / 2},
            "replace": True,
        }
        (await client.post(control, json=script)).raise_for_status()
    push, _audience = _gmail_push(settings)
    return {
        "RUN": run,
        "WA_HOST": settings.service_url(settings.whatsapp_port),
        "WA_SECRET": settings.secret("meta_app_secret"),
        "WA_PHONE_ID": "106000000000001",
        "WA_IMAGE_ID": image_id,
        "WA_AUDIO_ID": audio_id,
        "IG_HOST": settings.service_url(settings.instagram_port),
        "IG_SECRET": settings.secret("instagram_app_secret"),
        "IG_ACCOUNT": "17841400000000001",
        "IG_CDN": ig,
        "IG_ASSET_IMAGE": assets["image"],
        "IG_ASSET_AUDIO": assets["audio"],
        "GMAIL_HOST": settings.service_url(settings.gmail_port),
        "GMAIL_SANDBOX": settings.resolved_gmail_api_base_url,
        "GMAIL_PUSH_PATH": push.removeprefix(settings.service_url(settings.gmail_port)),
        "MAILBOX": "support@example.com",
        "ADMIN_TOKEN": settings.secret("admin_token"),
    }


def _gmail_push(settings: Any) -> tuple[str, str | None]:
    from switchboard.channels.gmail.cli import push_url

    return push_url(settings)


SENT_LOGS = {  # channel → (sandbox URL property, filter parameter, value): the demo accounts' send logs
    "whatsapp": ("whatsapp_sandbox_url", "phone_number_id", "106000000000001"),
    "instagram": ("instagram_sandbox_url", "account_id", "17841400000000001"),
    "gmail": ("resolved_gmail_api_base_url", "mailbox", "support@example.com"),
}


async def sends_after(
    client: httpx.AsyncClient, settings: Any, after: dict[str, int]
) -> dict[str, list[dict]]:
    """Every send each sandbox recorded with ``seq`` above ``after[channel]``."""
    found: dict[str, list[dict]] = {}
    for channel, (prop, param, value) in SENT_LOGS.items():
        answer = await client.get(
            f"{getattr(settings, prop)}/_control/sent", params={"after": after[channel], param: value}
        )
        answer.raise_for_status()
        found[channel] = answer.json()["messages"]
    return found


async def last_seqs(client: httpx.AsyncClient, settings: Any) -> dict[str, int]:
    out = {}
    for channel, (prop, param, value) in SENT_LOGS.items():
        answer = await client.get(
            f"{getattr(settings, prop)}/_control/sent", params={param: value, "after": 10**9}
        )
        answer.raise_for_status()
        out[channel] = answer.json()["last_seq"]
    return out


async def outbox_claims(database_url: str, since: float) -> dict[tuple[str, str], tuple[str | None, str]]:
    """``(channel, provider id) → (answered message's provider id, "purpose:part_index")`` of the outbox
    rows updated since ``since`` (epoch s; a row written before the run may be sent during it)."""
    from sqlalchemy import text
    from switchboard.db.engine import create_engine

    engine = create_engine(database_url, pool_size=1)
    try:
        async with engine.connect() as conn:
            rows = (
                await conn.execute(
                    text(
                        "SELECT o.channel, o.external_id, m.external_id, o.purpose, o.part_index FROM outbox o "
                        "LEFT JOIN messages m ON m.id = o.inbound_message_id "
                        "WHERE o.external_id IS NOT NULL AND o.updated_at >= to_timestamp(:since)"
                    ),
                    {"since": since - 5},
                )
            ).all()
    finally:
        await engine.dispose()
    return {(channel, ext): (answers, f"{purpose}:{part}") for channel, ext, answers, purpose, part in rows}


async def handoff_times(database_url: str) -> dict[tuple[str, str], float]:
    """``(channel, provider id) → epoch s`` its conversation first switched to ``human``, for every
    inbound message whose conversation was handed to a person (``conversation_events``); ``-inf`` for a
    message whose own processing handed it over without an AI reply (Gmail's automatic reply cap,
    ``switchboard.inbound.steps.reply_cap``: the thread goes to a person, by design)."""
    from sqlalchemy import text
    from switchboard.db.engine import create_engine

    engine = create_engine(database_url, pool_size=1)
    try:
        async with engine.connect() as conn:
            rows = (
                await conn.execute(
                    text(
                        "SELECT m.channel, m.external_id, extract(epoch FROM h.at) FROM messages m JOIN "
                        "(SELECT conversation_id, min(created_at) AS at FROM conversation_events "
                        "WHERE to_status = 'human' GROUP BY conversation_id) h ON h.conversation_id = m.conversation_id "
                        "WHERE m.direction = 'inbound' AND m.external_id IS NOT NULL"
                    )
                )
            ).all()
            capped = (
                await conn.execute(
                    text(
                        "SELECT channel, external_id FROM messages WHERE direction = 'inbound' AND inbound_state = 'done' "
                        "AND last_error LIKE 'automatic reply cap reached%'"
                    )
                )
            ).all()
    finally:
        await engine.dispose()
    out = {(channel, ext): float(at) for channel, ext, at in rows}
    out.update({(channel, ext): float("-inf") for channel, ext in capped})
    return out


async def states_of(database_url: str, ids: list[str]) -> dict[str, int]:
    """How many of the unanswered messages (``channel:provider id``) are in each ``inbound_state`` (plus
    their ``last_error``, and whether an outbox row for them is still waiting): ``pending`` /
    ``processing`` are backlog when the drain ended, ``done`` without a reply sent is a lost reply."""
    from sqlalchemy import text
    from switchboard.db.engine import create_engine

    if not ids:
        return {}
    engine = create_engine(database_url, pool_size=1)
    try:
        async with engine.connect() as conn:
            rows = (
                await conn.execute(
                    text(
                        "SELECT m.inbound_state, coalesce(m.last_error, ''), "
                        "(SELECT string_agg(DISTINCT o.status, ',') FROM outbox o WHERE o.inbound_message_id = m.id) "
                        "FROM messages m WHERE m.direction = 'inbound' AND m.channel || ':' || m.external_id = ANY(:ids)"
                    ),
                    {"ids": ids},
                )
            ).all()
    finally:
        await engine.dispose()
    counts: dict[str, int] = {}
    for state, error, outbox in rows:
        key = f"{state}" + (f" ({error[:60]})" if error else "") + (f" outbox {outbox}" if outbox else "")
        counts[key] = counts.get(key, 0) + 1
    missing = len(ids) - len(rows)
    if missing:
        counts["not stored"] = missing
    return counts


def to_replies(
    sends: dict[str, list[dict]], claims: dict[tuple[str, str], tuple[str | None, str]]
) -> list[Reply]:
    replies = []
    for channel, records in sends.items():
        for record in records:
            answers, part = claims.get((channel, record["id"]), (None, "?"))
            to = record.get("threadId") if channel == "gmail" else record.get("to")
            replies.append(Reply(channel, str(to), float(record["at"]), answers, part, record["id"]))
    return replies


async def sample_depths(
    redis_url: str, samples: list[tuple[float, dict[str, int]]], stop: asyncio.Event
) -> None:
    """Every 0.5 s: ready jobs per queue (``queue_depths``) and all jobs (ready + deferred, ``ZCARD``)."""
    from redis.asyncio import Redis
    from switchboard.queue.depth import queue_depths
    from switchboard.queue.queues import Queue

    redis = Redis.from_url(redis_url)
    try:
        while not stop.is_set():
            ready = await queue_depths(redis, [q.value for q in Queue])
            total = {q.value: int(await redis.zcard(q.value)) for q in Queue}
            samples.append(
                (
                    time.time(),
                    {
                        **{f"{q.name} ready": ready[q.value] for q in Queue},
                        **{f"{q.name} all": total[q.value] for q in Queue},
                    },
                )
            )
            try:
                await asyncio.wait_for(stop.wait(), 0.5)
            except TimeoutError:
                pass
    finally:
        await redis.aclose()


def plot(
    samples: list[tuple[float, dict[str, int]]], began: float, load_end: float, path: Path, title: str
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4.5))
    times = [t - began for t, _ in samples]
    for name in samples[0][1] if samples else []:
        ax.plot(times, [s[name] for _, s in samples], label=name)
    ax.axvline(load_end - began, color="grey", linestyle="--", label="load stops")
    ax.set_xlabel("seconds since the load started")
    ax.set_ylabel("jobs in the queue")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def read_records(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def warm_up(
    client: httpx.AsyncClient, settings: Any, scenario: dict[str, str], timeout_s: float = 240
) -> float:
    """One WhatsApp and one Instagram text from warm-up customers, answered before the load starts: the
    first turn of a fresh system imports LiteLLM and opens pools (tens of seconds on a loaded machine),
    which is start-up, not load. Returns the seconds it took."""
    started = time.monotonic()
    before = await last_seqs(client, settings)
    wa_id, igsid = f"19{scenario['RUN']}000000", f"99{scenario['RUN']}0000000000"
    wa = {
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
                                "phone_number_id": scenario["WA_PHONE_ID"],
                            },
                            "contacts": [{"profile": {"name": "Warm-up"}, "wa_id": wa_id}],
                            "messages": [
                                {
                                    "from": wa_id,
                                    "id": f"wamid.WARM{scenario['RUN']}=",
                                    "timestamp": str(int(time.time())),
                                    "type": "text",
                                    "text": {"body": "What are your opening hours?"},
                                }
                            ],
                        },
                    }
                ],
            }
        ],
    }
    now_ms = int(time.time() * 1000)
    ig = {
        "object": "instagram",
        "entry": [
            {
                "id": scenario["IG_ACCOUNT"],
                "time": now_ms,
                "messaging": [
                    {
                        "sender": {"id": igsid},
                        "recipient": {"id": scenario["IG_ACCOUNT"]},
                        "timestamp": now_ms,
                        "message": {
                            "mid": f"aWdfWARM{scenario['RUN']}",
                            "text": "How long does shipping take?",
                        },
                    }
                ],
            }
        ],
    }
    for url, body, secret in (
        (scenario["WA_HOST"] + "/webhooks/whatsapp", wa, scenario["WA_SECRET"]),
        (scenario["IG_HOST"] + "/webhooks/instagram", ig, scenario["IG_SECRET"]),
    ):
        raw = json.dumps(body).encode()
        signature = "sha256=" + hmac.new(secret.encode(), raw, hashlib.sha256).hexdigest()
        answer = await client.post(
            url, content=raw, headers={"X-Hub-Signature-256": signature, "Content-Type": "application/json"}
        )
        answer.raise_for_status()
    while time.monotonic() - started < timeout_s:
        sends = await sends_after(client, settings, before)
        if sends["whatsapp"] and sends["instagram"]:
            return time.monotonic() - started
        await asyncio.sleep(1)
    raise SystemExit(f"the warm-up messages got no reply in {timeout_s:g} s")


def proc_gone() -> bool:
    """The ``switchboard run`` this script started has exited (someone stopped it)."""
    return _SYSTEM is not None and _SYSTEM.poll() is not None


_SYSTEM: subprocess.Popen | None = None


async def run_load(
    args: argparse.Namespace,
    settings: Any,
    state: dict[str, Any],
    env: dict[str, str],
    tmp: Path,
    latency: str,
) -> int:
    from switchboard.settings import load_settings  # noqa: F401 (settings already loaded with env)

    run = str(random.randint(1000, 9999))
    control = {"Authorization": f"Bearer {settings.secret('admin_token')}"}
    records_path = tmp / f"records_{latency}.jsonl"
    think = [float(x) for x in args.think.split("-")]
    model_calls = int(args.users * args.duration / (sum(think) / 2) * 4) + 1000
    async with httpx.AsyncClient(timeout=60, headers=control) as client:
        scenario = await prepare(client, settings, run, latency, model_calls)
        print(f"warm-up turns answered in {await warm_up(client, settings, scenario):.0f} s")
        baseline = await last_seqs(client, settings)
        samples: list[tuple[float, dict[str, int]]] = []
        stop = asyncio.Event()
        sampler = asyncio.create_task(
            sample_depths(
                state["embedded_redis_url"] if not os.environ.get("REDIS_URL") else os.environ["REDIS_URL"],
                samples,
                stop,
            )
        )
        began = time.time()
        locust_env = dict(
            os.environ,
            **env,
            **{f"LOADTEST_{k}": v for k, v in scenario.items()},
            LOADTEST_RECORDS=str(records_path),
            LOADTEST_THINK=args.think,
        )
        locust = await asyncio.create_subprocess_exec(
            str(ROOT / ".venv/bin/locust"),
            "-f",
            str(HERE / "e2e_locustfile.py"),
            "--headless",
            "--only-summary",
            "-u",
            str(args.users),
            "-r",
            str(args.spawn_rate),
            "-t",
            f"{round(args.duration)}s",
            "--stop-timeout",
            "10",
            "--loglevel",
            "WARNING",
            cwd=str(ROOT),
            env=locust_env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        locust_out, _ = await locust.communicate()
        load_end = time.time()
        (tmp / f"locust_{latency}.log").write_bytes(locust_out)
        records = read_records(records_path)
        sent = sent_from_records(records)
        database_url = os.environ.get("DATABASE_URL") or state["embedded_database_url"]
        # drain: until every turn is answered, or the queues are empty and nothing was sent for --settle s
        deadline = time.monotonic() + args.drain_timeout
        last_count, last_change = -1, time.monotonic()
        while True:
            try:
                sends = await sends_after(client, settings, baseline)
            except httpx.HTTPError as exc:  # a loaded service missing one poll is no reason to give up
                if proc_gone():
                    raise SystemExit("the system stopped during the drain (see its log)") from exc
                await asyncio.sleep(2)
                continue
            claims = await outbox_claims(database_url, began)
            replies = to_replies(sends, claims)
            result = account(sent, replies, await handoff_times(database_url))
            count = sum(len(v) for v in sends.values())
            if count != last_count:
                last_count, last_change = count, time.monotonic()
            idle = samples and not any(v for k, v in samples[-1][1].items() if k.endswith("all"))
            if result.without_reply == 0 and time.monotonic() - last_change > 5:
                break
            if idle and time.monotonic() - last_change > args.settle:
                break
            if time.monotonic() > deadline:
                print(f"drain timeout after {args.drain_timeout:g} s")
                break
            await asyncio.sleep(2)
        drained = time.time()
        unanswered_states = await states_of(database_url, result.unanswered_ids)
        (tmp / f"sends_{latency}.json").write_text(json.dumps(sends))
        for channel, records_of in sends.items():  # what the unclaimed sends were, for the diagnosis
            for record in records_of:
                if (channel, record["id"]) not in claims:
                    print(
                        f"unclaimed {channel} send to {record.get('to')} at {record['at'] - began:.1f} s: "
                        f"{str(record.get('text') or record.get('type'))[:100]!r}"
                    )
        stop.set()
        await sampler
    report(args, latency, records, result, samples, began, load_end, drained, tmp, locust.returncode)
    if unanswered_states:
        print(
            "  unanswered messages by state when the drain ended: "
            + ", ".join(f"{k}: {v}" for k, v in sorted(unanswered_states.items()))
        )
    return 1 if result.without_reply or result.sent_twice else 0


def report(
    args: argparse.Namespace,
    latency: str,
    records: list[dict],
    result: Any,
    samples: list,
    began: float,
    load_end: float,
    drained: float,
    tmp: Path,
    locust_rc: int | None,
) -> None:
    print(
        f"\nend to end under load: {args.users} users, {args.duration:g} s of load, think {args.think} s, "
        f"model latency {latency} s, {os.cpu_count()} CPUs (shared: load average "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}); locust exit {locust_rc}"
    )
    print(
        f"posts: {len(records)} ({sum(r['redelivery'] for r in records)} redeliveries), "
        f"not acknowledged 200: {sum(r['status'] != 200 for r in records)}"
    )
    print(
        f"{'channel':>10} {'posts':>6} {'ack p50':>8} {'p95':>7} {'p99':>7}   {'turns':>5} {'reply p50':>9} {'p95':>6}  (ack ms, reply s)"
    )
    for channel in ("whatsapp", "instagram", "gmail"):
        acks = [r["ack_ms"] for r in records if r["channel"] == channel]
        lat = result.latencies.get(channel, [])
        print(
            f"{channel:>10} {len(acks):>6} {percentile(acks, 0.5):>8.1f} {percentile(acks, 0.95):>7.1f} "
            f"{percentile(acks, 0.99):>7.1f}   {len(lat):>5} {percentile(lat, 0.5):>9.2f} {percentile(lat, 0.95):>6.2f}"
        )
    everything = [x for v in result.latencies.values() for x in v]
    print(
        f"{'all':>10} {len(records):>6} {percentile([r['ack_ms'] for r in records], 0.5):>8.1f} "
        f"{percentile([r['ack_ms'] for r in records], 0.95):>7.1f} {percentile([r['ack_ms'] for r in records], 0.99):>7.1f}"
        f"   {len(everything):>5} {percentile(everything, 0.5):>9.2f} {percentile(everything, 0.95):>6.2f}"
    )
    if samples:
        names = list(samples[0][1])
        peak = {n: max(s[n] for _, s in samples) for n in names}
        print("queue depth (jobs; peak): " + ", ".join(f"{n} {peak[n]}" for n in names))
        step = max(1, len(samples) // 12)
        print("queue depth over time (s since start: chat ready/all, background ready/all):")
        print(
            "  "
            + "  ".join(
                f"{t - began:.0f}s:{s['chat ready']}/{s['chat all']},{s['background ready']}/{s['background all']}"
                for t, s in samples[::step]
            )
        )
        out = (
            Path(args.plot.replace("{latency}", latency)) if args.plot else tmp / f"queue_depth_{latency}.png"
        )
        plot(
            samples,
            began,
            load_end,
            out,
            f"queue depth, {args.users} users, model latency {latency} s",
        )
        print(f"queue depth plot: {out}")
    print(
        f"drained {drained - load_end:.0f} s after the load stopped; turns answered {result.turns_answered}, "
        f"customer messages {result.messages}"
    )
    print(
        f"customer messages without a reply: {result.without_reply} (customers: {result.customers_unanswered})"
    )
    print(f"customer messages handed to a person (human mode, answered by design): {result.handed_to_person}")
    print(
        f"replies sent twice: {result.sent_twice} (same reply again: {result.sent_twice - result.unclaimed_sends - result.misdirected}, "
        f"sends no outbox row claims: {result.unclaimed_sends}, to the wrong customer: {result.misdirected})"
    )
    if result.unanswered_ids:
        print("  unanswered (first 10): " + ", ".join(result.unanswered_ids[:10]))
    if result.unclaimed:
        print("  unclaimed sends (first 10): " + "; ".join(result.unclaimed[:10]))
    if result.doubled_keys:
        print("  doubled (first 10): " + ", ".join(f"{k} {p}" for k, p in result.doubled_keys[:10]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=250)
    parser.add_argument("--duration", type=float, default=60, help="seconds of load")
    parser.add_argument(
        "--model-latency",
        nargs="+",
        default=["0"],
        help="0, or LOW-HIGH seconds per model call (1-3); several: one run each, on one system",
    )
    parser.add_argument("--think", default="15-30", help="seconds a customer waits between turns (LOW-HIGH)")
    parser.add_argument("--spawn-rate", type=float, default=50)
    parser.add_argument("--drain-timeout", type=float, default=300)
    parser.add_argument(
        "--settle", type=float, default=20, help="queues empty and no send for this long: done"
    )
    parser.add_argument("--tenant-rate-limit", type=int, default=100000)
    parser.add_argument("--data-dir", default="/tmp/load-data")
    parser.add_argument(
        "--port-base", type=int, default=9400, help="first of the eleven ports of the run (9400: 9400-9410)"
    )
    parser.add_argument(
        "--keep-data",
        action="store_true",
        help="keep --data-dir (default: delete it first: the sandboxes live in memory, so a kept "
        "database holds Gmail cursors and tokens the new sandbox never issued)",
    )
    parser.add_argument(
        "--attach", action="store_true", help="use a running system (same env), leave it running"
    )
    parser.add_argument(
        "--plot", help="PNG path, {latency} replaced (default: in the run's temporary folder, kept)"
    )
    parser.add_argument("--quick", action="store_true", help="250 users, 20 s of load, 90 s drain at most")
    args = parser.parse_args()
    # Checked before the system starts: without it the run started everything, then died in a traceback.
    if not (ROOT / ".venv/bin/locust").exists() or importlib.util.find_spec("matplotlib") is None:
        sys.exit(
            "Locust and matplotlib are not installed: they are in the `load` group, "
            "`.venv/bin/uv sync --frozen --inexact --group load`"
        )
    if args.quick:
        args.duration, args.drain_timeout = min(args.duration, 20), min(args.drain_timeout, 90)
    env = system_env(args)
    os.environ.update(env)
    if not args.keep_data and not args.attach:
        shutil.rmtree(args.data_dir, ignore_errors=True)
    from switchboard.settings import load_settings

    settings = load_settings()
    tmp = Path(tempfile.mkdtemp(prefix="load-e2e-"))
    global _SYSTEM
    proc = _SYSTEM = None if args.attach else start_system(env, tmp / "switchboard.log")
    code = 2
    try:
        started = time.monotonic()
        state = wait_ready(settings, proc)
        print(f"system healthy after {time.monotonic() - started:.0f} s (log: {tmp / 'switchboard.log'})")
        connect_gmail(env, tmp)
        code = 0
        for latency in args.model_latency:
            code |= asyncio.run(run_load(args, settings, state, env, tmp, latency))
    finally:
        if proc is not None:
            stop_system(proc)
    print(f"records, Locust summary and logs: {tmp}")
    raise SystemExit(code)


if __name__ == "__main__":
    main()
