"""Telling a database that is unavailable from a database that refused one value.

Callers answer the first with "try again later" (a webhook's 503, a job's ``Retry``) and the second
with a clear, final error: retrying the same bytes cannot fix it.
"""

from __future__ import annotations

import asyncpg
from sqlalchemy import exc as sa_exc

__all__ = ["is_connection_error"]


def is_connection_error(exc: BaseException) -> bool:
    """Whether ``exc`` means the database itself is unavailable, as opposed to the database refusing one
    value (which a retry of the same bytes cannot fix).

    Connection-level: the network (``OSError``, timeouts), SQLAlchemy's ``OperationalError`` and
    ``InterfaceError``, a ``DBAPIError`` with ``connection_invalidated``, a pool timeout, a disconnect.
    Not: ``DataError``, ``IntegrityError``, ``ProgrammingError``, encoding errors (SQLAlchemy error
    hierarchy, "Core Exceptions").
    """
    if isinstance(exc, (OSError, TimeoutError, sa_exc.TimeoutError, sa_exc.DisconnectionError)):
        return True
    if isinstance(exc, asyncpg.PostgresError | asyncpg.InterfaceError):  # the driver path, unwrapped
        # asyncpg's DataError (a parameter it cannot encode) is an InterfaceError but about one value;
        # SQLSTATE classes 08 (connection), 53 (resources), 57 (shutdown, cannot connect now)
        if isinstance(exc, asyncpg.DataError):
            return False
        if isinstance(exc, asyncpg.InterfaceError):
            return True
        return str(getattr(exc, "sqlstate", "") or "")[:2] in {"08", "53", "57"}
    if isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated:
        return True
    return isinstance(exc, (sa_exc.OperationalError, sa_exc.InterfaceError))
