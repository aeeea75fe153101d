"""Telling a database that is unavailable from a database that refused one value.

Callers answer the first with "try again later" (a webhook's 503, a job's ``Retry``) and the second
with a clear, final error: retrying the same bytes cannot fix it.
"""

from __future__ import annotations

import asyncpg
from sqlalchemy import exc as sa_exc

__all__ = ["is_connection_error"]

_CONNECTION_SQLSTATE_CLASSES = frozenset({"08", "53", "57"})
"""SQLSTATE classes of an unavailable server (PostgreSQL, Appendix A): 08 connection exception, 53
insufficient resources, 57 operator intervention (shutdown, cannot connect now)."""


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
        return str(getattr(exc, "sqlstate", "") or "")[:2] in _CONNECTION_SQLSTATE_CLASSES
    if isinstance(exc, sa_exc.DBAPIError):
        if exc.connection_invalidated:
            return True
        # SQLAlchemy's asyncpg dialect raises most driver errors as a plain DBAPIError; the SQLSTATE is
        # on the adapted error ("the database system is shutting down" is 57P01, a restart's first sign)
        if str(getattr(exc.orig, "sqlstate", "") or "")[:2] in _CONNECTION_SQLSTATE_CLASSES:
            return True
        if isinstance(getattr(exc.orig, "__cause__", None), asyncpg.exceptions.InternalClientError):
            return True  # "cannot switch to state ...": a connection the failure before left half-used
    return isinstance(exc, (sa_exc.OperationalError, sa_exc.InterfaceError))
