"""The ``deliver_outbox`` cron job as the worker registers and runs it."""

from __future__ import annotations

from arq.cron import CronJob
from switchboard.worker import build_chat_worker_settings

from tests.utils.outbox import rows_of, sent_by, write_parts


async def test_worker_cron_delivers_what_is_due(
    make_settings, make_scene, sessions, sandbox, arq_redis
) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings()
    worker_settings = build_chat_worker_settings(settings)
    crons = {c.name: c for c in worker_settings.cron_jobs if isinstance(c, CronJob)}
    assert "deliver_handoff" not in crons and crons["deliver_outbox_sweep"].second == set(range(1, 60, 5))
    scene = await make_scene()
    await write_parts(sessions, scene, ["from the cron"])

    ctx = {"redis": arq_redis}
    await worker_settings.on_startup(ctx)
    try:
        report = await crons["deliver_outbox_sweep"].coroutine(ctx)
        again = await crons["deliver_outbox_sweep"].coroutine(ctx)
    finally:
        await worker_settings.on_shutdown(ctx)

    assert report["sent"] >= 1 and again["sent"] == 0
    assert [m["text"] for m in await sent_by(sandbox[0], scene.phone_number_id)] == ["from the cron"]
    assert [r.status for r in await rows_of(sessions, scene)] == ["sent"]
