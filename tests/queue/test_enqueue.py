"""One-round-trip enqueue (:mod:`switchboard.queue.enqueue`) against the real Redis: what it writes is
what ARQ's own ``enqueue_job`` writes (an unchanged ARQ worker runs it), ids stay idempotent, and it is
one command on the wire."""

from __future__ import annotations

import uuid

from arq.constants import job_key_prefix, result_key_prefix
from arq.jobs import Job, JobStatus
from switchboard.queue.enqueue import JobSpec, enqueue_jobs


async def test_jobs_are_stored_as_arq_stores_them_deferred_and_once_per_id(
    arq_pool, stops_at_the_queue
) -> None:  # type: ignore[no-untyped-def]
    tag = uuid.uuid4().hex
    now_spec = JobSpec("process_inbound", f"t:{tag}:now", ("row-1",), {"traceparent": "00-abc-def-01"})
    later = JobSpec(
        "apply_delivery_statuses", f"t:{tag}:later", ("whatsapp", [{"status": "read"}]), defer_s=2.5
    )
    assert await enqueue_jobs(arq_pool, [now_spec, later]) == [True, True]

    info = await Job(now_spec.job_id, arq_pool).info()
    assert info is not None
    assert (info.function, info.args, info.kwargs) == (
        "process_inbound",
        ("row-1",),
        {"traceparent": "00-abc-def-01"},
    )
    scores = dict(await arq_pool.zrange(arq_pool.default_queue_name, 0, -1, withscores=True))
    deferred_ms = scores[later.job_id.encode()] - scores[now_spec.job_id.encode()]
    assert 2400 <= deferred_ms <= 2600
    assert await Job(later.job_id, arq_pool).status() == JobStatus.deferred
    ttl_ms = await arq_pool.pttl(job_key_prefix + later.job_id)
    assert 86_400_000 < ttl_ms <= 86_400_000 + 2500  # ARQ's expiry: one day past the deferral

    # a second enqueue of a queued id, or of an id with a kept result, writes nothing
    await arq_pool.set(result_key_prefix + f"t:{tag}:done", b"result")
    done = JobSpec("process_inbound", f"t:{tag}:done", ("row-2",))
    fresh = JobSpec("process_inbound", f"t:{tag}:fresh", ("row-3",))
    assert await enqueue_jobs(arq_pool, [now_spec, done, fresh]) == [False, False, True]
    assert (await Job(now_spec.job_id, arq_pool).info()).args == ("row-1",)  # type: ignore[union-attr]
    queued = {m.decode() for m in await arq_pool.zrange(arq_pool.default_queue_name, 0, -1)}
    assert {now_spec.job_id, later.job_id, fresh.job_id} <= queued and done.job_id not in queued
    await arq_pool.delete(result_key_prefix + done.job_id)
    assert await enqueue_jobs(arq_pool, []) == []


async def _calls(pool) -> dict[str, int]:  # type: ignore[no-untyped-def]
    stats = await pool.info("commandstats")
    return {
        name: int(stats.get(f"cmdstat_{name}", {}).get("calls", 0))
        for name in ("evalsha", "eval", "watch", "exec")
    }


async def test_the_whole_batch_is_one_command_and_survives_a_script_flush(
    arq_pool, stops_at_the_queue
) -> None:  # type: ignore[no-untyped-def]
    tag = uuid.uuid4().hex
    jobs = [JobSpec("process_inbound", f"t:{tag}:{i}", (str(i),)) for i in range(3)]
    await arq_pool.script_flush()  # as after a Redis restart: the script is loaded again, nothing lost
    assert await enqueue_jobs(arq_pool, jobs) == [True, True, True]
    before = await _calls(arq_pool)
    more = [JobSpec("process_inbound", f"t:{tag}:more{i}", (str(i),)) for i in range(3)]
    assert await enqueue_jobs(arq_pool, more) == [True, True, True]
    after = await _calls(arq_pool)
    # three jobs, one EVALSHA; none of ARQ's WATCH/MULTI/EXEC
    assert {k: after[k] - before[k] for k in after} == {"evalsha": 1, "eval": 0, "watch": 0, "exec": 0}
    queued = {m.decode() for m in await arq_pool.zrange(arq_pool.default_queue_name, 0, -1)}
    assert {j.job_id for j in jobs + more} <= queued


async def test_a_media_copy_is_taken_before_a_backlog_of_chat_turns(arq_pool) -> None:  # type: ignore[no-untyped-def]
    """The worker reads the lowest scores first (``ZRANGEBYSCORE -inf now``): a copy queued behind fifty
    customer messages is read first."""
    from switchboard.queue.jobs import copy_media_spec, process_inbound_spec

    queue = f"test:lane:{uuid.uuid4().hex}"
    backlog = [process_inbound_spec(uuid.uuid4()) for _ in range(50)]
    assert all(await enqueue_jobs(arq_pool, backlog, queue_name=queue))
    copy = copy_media_spec(uuid.uuid4())
    assert await enqueue_jobs(arq_pool, [copy], queue_name=queue) == [True]
    ready = [m.decode() for m in await arq_pool.zrangebyscore(queue, "-inf", "+inf")]
    assert ready[0] == copy.job_id
    assert sorted(ready[1:]) == sorted(spec.job_id for spec in backlog)
    await arq_pool.delete(queue, *(job_key_prefix + job_id for job_id in ready))
