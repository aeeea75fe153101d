"""Which database errors mean "unavailable, try again" (switchboard.db.errors), against the real server."""

from __future__ import annotations

import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy import text
from switchboard.db.engine import create_engine
from switchboard.db.errors import is_connection_error


async def test_a_connection_the_server_terminates_is_a_connection_error(database_url: str) -> None:
    """``pg_terminate_backend`` is what a restart (``pg_ctl restart -m fast``) does to every session:
    57P01, "terminating connection due to administrator command"."""
    engine, other = create_engine(database_url), create_engine(database_url)
    try:
        async with engine.connect() as victim, other.connect() as admin:
            pid = (await victim.execute(text("SELECT pg_backend_pid()"))).scalar_one()
            await admin.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
            with pytest.raises(sa_exc.DBAPIError) as raised:
                await victim.execute(text("SELECT 1"))
        assert is_connection_error(raised.value), repr(raised.value)
    finally:
        await engine.dispose()
        await other.dispose()


async def test_a_refused_value_is_not_a_connection_error(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            for statement in ("SELECT 1/0", "SELECT no_such_column", "SELECT 'x'::int"):
                with pytest.raises(sa_exc.DBAPIError) as raised:
                    await connection.execute(text(statement))
                await connection.rollback()
                assert not is_connection_error(raised.value), statement
    finally:
        await engine.dispose()


async def test_a_server_refusing_new_connections_is_a_connection_error(database_url: str) -> None:
    """A server that answers a connection attempt with an error of its own (SQLSTATE class 53 here, "too
    many connections"; 57P03 "the database system is shutting down" while it restarts): SQLAlchemy's
    asyncpg dialect raises a plain DBAPIError whose SQLSTATE is on ``orig``."""
    from sqlalchemy.engine import make_url

    role = "sb_no_connections"
    admin = create_engine(database_url)
    refused = create_engine(make_url(database_url).set(username=role).render_as_string(hide_password=False))
    try:
        async with admin.connect() as connection:
            await connection.execute(text(f"DROP ROLE IF EXISTS {role}"))
            await connection.execute(text(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT 0"))
            await connection.commit()
        with pytest.raises(sa_exc.DBAPIError) as raised:
            async with refused.connect() as connection:
                await connection.execute(text("SELECT 1"))
        assert getattr(raised.value.orig, "sqlstate", None) == "53300", repr(raised.value)
        assert is_connection_error(raised.value)
    finally:
        await refused.dispose()
        async with admin.connect() as connection:
            await connection.execute(text(f"DROP ROLE IF EXISTS {role}"))
            await connection.commit()
        await admin.dispose()
