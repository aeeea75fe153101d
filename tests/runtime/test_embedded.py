"""Embedded servers: start, stop and restart keep data; a taken port is a clear error."""

import asyncio
import uuid

import pytest
import redis
from switchboard.db.migrate import upgrade
from switchboard.errors import EmbeddedServerError
from switchboard.runtime.embedded import (
    MAX_CONNECTIONS,
    PRELOAD_LIBRARIES,
    SHARED_BUFFERS,
    EmbeddedPostgres,
    EmbeddedRedis,
)

from tests.utils.net import free_port


def _psql_rows(url, sql):
    import asyncpg
    from sqlalchemy.engine import make_url

    parsed = make_url(url)

    async def go():
        conn = await asyncpg.connect(user="postgres", host=parsed.query["host"], database=parsed.database)
        try:
            return [tuple(r) for r in await conn.fetch(sql)]
        finally:
            await conn.close()

    return asyncio.run(go())


def test_postgres_restart_keeps_data_and_attaching_does_not_stop(tmp_path):
    tmp_path.chmod(0o755)
    pg = EmbeddedPostgres(tmp_path / "postgres")
    url = pg.start()
    assert pg.started_here
    try:
        upgrade(url)
        _psql_rows(
            url,
            "INSERT INTO organizations (id, name) VALUES ('00000000-0000-0000-0000-000000000001', 'kept')",
        )
        # A second handle (a CLI command while `run` is up) attaches and leaves the server running.
        other = EmbeddedPostgres(tmp_path / "postgres")
        assert other.start() == url
        assert not other.started_here
        other.stop(only_if_started_here=True)
        assert pg.is_running()
        filenode = _psql_rows(url, "SELECT pg_relation_filenode('organizations')")[0][0]
    finally:
        pg.stop()
    assert not pg.is_running()
    # autoprewarm wrote the pages in shared buffers at shutdown (header line, then
    # "database,tablespace,filenode,fork,block" per page), so the next start reads them back in
    blocks = (tmp_path / "postgres" / "autoprewarm.blocks").read_text().splitlines()
    assert blocks[0].startswith("<<")
    assert any(line.split(",")[2] == str(filenode) for line in blocks[1:])

    again = EmbeddedPostgres(tmp_path / "postgres")
    url2 = again.start()
    try:
        assert url2 == url
        assert _psql_rows(url2, "SELECT name FROM organizations") == [("kept",)]
        upgrade(url2)  # already at head: a no-op, not an error
        version = _psql_rows(url2, "SELECT extversion FROM pg_extension WHERE extname = 'vector'")[0][0]
        assert tuple(int(p) for p in version.split(".")[:2]) >= (0, 8)
        # room for every process's pool of `switchboard run` plus CLI commands (default 100 ran out)
        assert _psql_rows(url2, "SHOW max_connections") == [(str(MAX_CONNECTIONS),)]
        # a tenant's chunk rows stay in the cache at 100,000 chunks (128MB read them from disk)
        assert _psql_rows(url2, "SHOW shared_buffers") == [(SHARED_BUFFERS,)] == [("1GB",)]
        assert (
            _psql_rows(url2, "SHOW shared_preload_libraries") == [(PRELOAD_LIBRARIES,)] == [("pg_prewarm",)]
        )
    finally:
        again.stop()


def test_redis_restart_keeps_data_via_aof(tmp_path):
    port = free_port()
    server = EmbeddedRedis(tmp_path / "redis", port)
    url = server.start()
    key = f"k-{uuid.uuid4().hex}"
    client = redis.Redis.from_url(url)
    client.set(key, "v1")
    client.close()
    server.stop()
    assert (tmp_path / "redis" / "appendonly.aof").exists()

    server2 = EmbeddedRedis(tmp_path / "redis", port)
    server2.start()
    try:
        client = redis.Redis.from_url(url)
        assert client.get(key) == b"v1"
        client.close()
    finally:
        server2.stop()


def test_redis_port_taken_by_someone_else_is_a_clear_error(tmp_path, redis_url):
    from urllib.parse import urlsplit

    taken = urlsplit(redis_url)
    if taken.port is None:
        pytest.fail("test needs a TCP redis_url")
    with pytest.raises(EmbeddedServerError) as excinfo:
        EmbeddedRedis(tmp_path / "other", taken.port, taken.hostname).start()
    assert "already in use" in str(excinfo.value)
    assert "EMBEDDED_REDIS_PORT" in str(excinfo.value)
