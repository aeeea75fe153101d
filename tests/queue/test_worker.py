"""The two queues: each job on one queue, the chat worker without long jobs, enqueues on the right one."""

from __future__ import annotations

import uuid

from arq.connections import ArqRedis, RedisSettings, create_pool
from switchboard.db.models import KnowledgeSource
from switchboard.knowledge.jobs import enqueue_ingest
from switchboard.queue import JOB_QUEUES, Queue, health_check_key
from switchboard.runtime.services import SERVICES
from switchboard.worker import (
    WORKER_SETTINGS_BUILDERS,
    build_background_worker_settings,
    build_chat_worker_settings,
    worker_main,
)


def _jobs(cls: type) -> dict[str, float | None]:
    return {job.name: job.timeout_s for job in [*cls.functions, *cls.cron_jobs]}


def test_every_job_runs_on_exactly_one_queue(settings):
    registered = {queue: _jobs(build(settings)) for queue, build in WORKER_SETTINGS_BUILDERS.items()}
    assert set(registered) == set(Queue)
    for queue, jobs in registered.items():
        assert {name: JOB_QUEUES[name] for name in jobs} == dict.fromkeys(jobs, queue)
        assert WORKER_SETTINGS_BUILDERS[queue](settings).queue_name == queue.value
    every = [name for jobs in registered.values() for name in jobs]
    assert sorted(every) == sorted(JOB_QUEUES)  # each once, none forgotten
    assert set(registered[Queue.background]) >= {
        "ingest_knowledge_source",
        "summarize_memory",
        "memory_sweep",
    }
    assert set(registered[Queue.chat]) >= {
        "process_inbound",
        "apply_whatsapp_statuses",
        "deliver_outbox",
        "deliver_outbox_sweep",
    }


def test_the_chat_workers_longest_job_is_the_inbound_job(settings):
    """arq #402: a killed worker's job stays "in progress" for the largest timeout on that worker."""
    chat = build_chat_worker_settings(settings)
    assert max(_jobs(chat).values()) == settings.inbound_job_timeout_s == chat.job_timeout
    assert build_background_worker_settings(settings).job_timeout >= 900  # ingestion lives there


def test_each_worker_service_has_its_queue_and_heartbeat_key():
    workers = {spec.name: spec for spec in SERVICES if spec.kind == "worker"}
    assert {name: spec.queue for name, spec in workers.items()} == {
        "worker": Queue.chat,
        "worker_background": Queue.background,
    }
    assert workers["worker"].health_key == "arq:queue:health-check"  # ARQ's default: unchanged
    assert workers["worker_background"].health_key == health_check_key(Queue.background)


async def test_ingestion_is_enqueued_on_the_background_queue(arq_pool: ArqRedis):
    source = KnowledgeSource(
        id=uuid.uuid4(), tenant_id=uuid.uuid4(), filename="faq.md", size_bytes=1, content_hash="abc"
    )
    job_id = await enqueue_ingest(arq_pool, source)
    try:
        assert await arq_pool.zscore(Queue.background.value, job_id) is not None
        assert await arq_pool.zscore(Queue.chat.value, job_id) is None
    finally:
        await arq_pool.zrem(Queue.background.value, job_id)
        await arq_pool.delete(f"arq:job:{job_id}")


async def test_background_jobs_enqueue_chat_jobs_on_the_chat_queue(settings, arq_pool: ArqRedis):
    """The sweeper (background) re-enqueues ``process_inbound`` (chat) through ``resources.redis``."""
    background = build_background_worker_settings(settings)
    worker_pool = await create_pool(
        RedisSettings.from_dsn(settings.redis_url), default_queue_name=Queue.background
    )
    ctx: dict = {"redis": worker_pool}  # what ARQ hands the background worker: its own queue by default
    await background.on_startup(ctx)
    try:
        job = await ctx["deps"].redis.enqueue_job("ping", _job_id=f"probe:{uuid.uuid4()}")
        assert job is not None
        assert await arq_pool.zscore(Queue.chat.value, job.job_id) is not None
    finally:
        await background.on_shutdown(ctx)
        await worker_pool.aclose()
        await arq_pool.zrem(Queue.chat.value, job.job_id)
        await arq_pool.delete(f"arq:job:{job.job_id}")


def test_check_without_redis_and_without_a_running_system_is_a_one_line_error(
    monkeypatch, tmp_path, capsys
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setenv("DATA_DIR", str(tmp_path))  # no run.json here
    assert worker_main(Queue.background, ["--check"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.startswith("error: ") and "REDIS_URL" in out.err
    assert len(out.err.strip().splitlines()) == 1
