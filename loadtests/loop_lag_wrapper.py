"""The WhatsApp service with a loop-lag watchdog, for trial runs (never production).

``webhook_vs_floor.py --project-target loadtests.loop_lag_wrapper:create_app`` starts it instead of
``services.whatsapp.main:create_app``. Lines go to ``LAG_OUT`` (default ``/tmp/loop_lag.txt``, wall-clock
epoch seconds first):

* ``LAG <ms>``: a 5 ms ``asyncio.sleep`` overslept by more than 15 ms (the loop was busy or blocked);
* ``STALL <ms> so far`` + the main thread's stack: a watchdog thread saw no heartbeat for 30 ms, so
  the stack is what kept the loop;
* ``GC gen<N> <ms>``: a collection longer than 2 ms (``gc.callbacks``), with the objects the collector
  tracks (``tracked``) and the frozen ones;
* ``GCSTATS``: every 5 s, the collections of each generation so far and their total time.

``LAG_GC_THRESHOLDS=700,10,10`` sets those thresholds on the first request (after the service's own
start-up set its :data:`~switchboard.service_app.GC_THRESHOLDS`): the A/B of a threshold in one checkout.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
import threading
import time
import traceback
from typing import Any

from services.whatsapp.main import create_app as _create_service

OUT = open(os.environ.get("LAG_OUT", "/tmp/loop_lag.txt"), "a", buffering=1)  # noqa: SIM115 (process-long)
_beat = [time.perf_counter()]
_gc_started = [0.0]


_gc_ms = [0.0, 0.0, 0.0]


def _on_gc(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _gc_started[0] = time.perf_counter()
        return
    took = (time.perf_counter() - _gc_started[0]) * 1000
    _gc_ms[info["generation"]] += took
    if took > 2:
        OUT.write(
            f"{time.time():.3f} GC gen{info['generation']} {took:.1f} ms collected={info['collected']} "
            f"tracked={sum(len(gc.get_objects(g)) for g in range(3))} frozen={gc.get_freeze_count()}\n"
        )


def _watchdog(main_id: int) -> None:
    dumped_for = None
    while True:
        time.sleep(0.005)
        beat = _beat[0]
        stale = time.perf_counter() - beat
        if stale > 0.03 and dumped_for != beat:
            dumped_for = beat
            stack = "".join(traceback.format_stack(sys._current_frames().get(main_id)))
            OUT.write(f"{time.time():.3f} STALL {stale * 1000:.0f} ms so far; main stack:\n{stack}\n")


async def _heartbeat() -> None:
    last_stats = time.perf_counter()
    while True:
        if time.perf_counter() - last_stats > 5:
            last_stats = time.perf_counter()
            counts = [g["collections"] for g in gc.get_stats()]
            OUT.write(
                f"{time.time():.3f} GCSTATS collections={counts} ms={[round(x, 1) for x in _gc_ms]} "
                f"thresholds={gc.get_threshold()}\n"
            )
        t = time.perf_counter()
        _beat[0] = t
        await asyncio.sleep(0.005)
        lag = (time.perf_counter() - t - 0.005) * 1000
        if lag > 15:
            OUT.write(f"{time.time():.3f} LAG {lag:.1f} ms\n")


def create_app() -> Any:
    """The service's ASGI app, with the heartbeat task and the watchdog started on the first event."""
    app = _create_service()
    gc.callbacks.append(_on_gc)
    tasks: list[asyncio.Task[None]] = []

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if not tasks and scope["type"] == "http":
            if os.environ.get("LAG_GC_THRESHOLDS"):
                gc.set_threshold(*(int(x) for x in os.environ["LAG_GC_THRESHOLDS"].split(",")))
            tasks.append(asyncio.get_running_loop().create_task(_heartbeat()))
            threading.Thread(target=_watchdog, args=(threading.main_thread().ident,), daemon=True).start()
        await app(scope, receive, send)

    return wrapped
