"""The measuring half of ``worker_overhead.py`` (run it through that script, not alone).

One pytest item on the suite's own fixtures (embedded Postgres and Redis, the real orchestrator on a
loopback port, the offline model server with scripted answers, the Graph sandbox): ``WORKER_TURNS``
signed text webhooks from as many new customers go through the WhatsApp service, then the real chat
worker answers them one job at a time. What the worker's thread spends (the orchestrator and the
sandboxes run in threads of their own) is written as JSON to ``WORKER_OVERHEAD_OUT``.
"""

from __future__ import annotations

import collections
import cProfile
import functools
import gc
import json
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine
from switchboard.standins.offline_server import ScriptedResponse

from tests.utils.whatsapp import channel_service, sent_to, text_body
from tests.utils.workers import run_worker_burst


def _time_steps(cpu_by_step: collections.Counter[str]) -> None:
    """Wrap each inbound step (and the claim, the delivery, the orchestrator call) to add the worker
    thread's CPU seconds spent inside it to ``cpu_by_step`` (a benchmark's probe, never in a test)."""
    import switchboard.inbound.job as job
    import switchboard.inbound.steps as steps

    def timed(fn: Any, name: str) -> Any:
        @functools.wraps(fn)
        async def inner(*args: Any, **kwargs: Any) -> Any:
            started = time.thread_time()
            try:
                return await fn(*args, **kwargs)
            finally:
                cpu_by_step[name] += time.thread_time() - started

        return inner

    job.STEPS = tuple(timed(step, step.__name__) for step in steps.STEPS)  # type: ignore[assignment]
    job.claim = timed(job.claim, "claim")  # type: ignore[assignment]
    steps._deliver = timed(steps._deliver, "  of which delivery")  # type: ignore[assignment]
    steps.request_turn = timed(steps.request_turn, "  of which the orchestrator call")  # type: ignore[assignment]
    import switchboard.outbox.delivery as delivery

    for name, label in (
        ("_due_rows", "due rows"),
        ("_claim", "claim"),
        ("_record_sent", "record sent (with read receipt)"),
        ("_mark_read", "read receipt"),
        ("_left_over", "left over"),
    ):
        setattr(delivery, name, timed(getattr(delivery, name), f"    delivery: {label}"))
    for channel_module in ("switchboard.channels.whatsapp.channel",):
        import importlib

        cls = importlib.import_module(channel_module).WhatsAppChannel
        cls.send = timed(cls.send, "    delivery: provider call (send)")
        cls.mark_read = timed(cls.mark_read, "    delivery: provider call (read receipt)")


async def test_worker_overhead(e2e_settings, wa_tenant, graph_sandbox, script) -> None:  # type: ignore[no-untyped-def]
    turns = int(os.environ.get("WORKER_TURNS", "60"))
    settings, pid = e2e_settings(), wa_tenant.phone_number_id
    returning = bool(os.environ.get("WORKER_RETURNING"))
    model = await script()
    for index in range(turns * (2 if returning else 1)):
        model.push(ScriptedResponse(content=f"Answer {index}."))
    customers = [f"1555{uuid.uuid4().int % 10**7:07d}" for _ in range(turns)]

    async def post_one_each() -> None:
        async with channel_service(settings) as svc:
            for customer in customers:
                body = text_body(
                    phone_number_id=pid,
                    wamid=f"wamid.{uuid.uuid4().hex}",
                    text="When do you open?",
                    wa_id=customer,
                )
                assert (await svc.post(body)).status_code == 200

    await post_one_each()
    if returning:  # the customers and their conversations exist: the measured turns are their second
        await run_worker_burst(settings, max_jobs=1)
        await post_one_each()

    worker_thread = threading.get_ident()
    kinds: collections.Counter[str] = collections.Counter()
    cpu_by_step: collections.Counter[str] = collections.Counter()

    def count(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
        if threading.get_ident() == worker_thread:
            kinds[statement.split(None, 1)[0].upper()] += 1

    if os.environ.get("WORKER_BY_STEP"):
        _time_steps(cpu_by_step)
    profile = cProfile.Profile() if os.environ.get("WORKER_PROFILE") else None
    event.listen(Engine, "before_cursor_execute", count)
    # as a service does once it is up (switchboard.service_app): the start-up heap (pytest, LiteLLM...)
    # out of the collector's sight, else a full collection of it lands at random in the figures
    gc.collect()
    gc.freeze()
    started_wall, started_cpu = time.perf_counter(), time.thread_time()
    if profile is not None:
        profile.enable()
    try:
        await run_worker_burst(settings, max_jobs=1)
    finally:
        if profile is not None:
            profile.disable()
        event.remove(Engine, "before_cursor_execute", count)
    wall_s, cpu_s = time.perf_counter() - started_wall, time.thread_time() - started_cpu

    sent, expected = len(sent_to(graph_sandbox[1], pid)), turns * (2 if returning else 1)
    assert sent == expected, f"{sent} of {expected} replies sent"
    if profile is not None:
        profile.dump_stats(os.environ["WORKER_PROFILE"])
    figures = {
        "turns": turns,
        "returning": returning,
        "wall_ms_per_turn": wall_s * 1000 / turns,
        "worker_cpu_ms_per_turn": cpu_s * 1000 / turns,
        "statements_per_turn": {kind: n / turns for kind, n in kinds.most_common()},
        "cpu_ms_per_turn_by_step": {name: s * 1000 / turns for name, s in cpu_by_step.most_common()},
    }
    # after the measured part: a blocking write costs nothing measured
    Path(os.environ["WORKER_OVERHEAD_OUT"]).write_text(json.dumps(figures))  # noqa: ASYNC240
