"""Cursor pagination for every list of the public API: keyset on ``(created_at, id)``, newest first.

A list takes ``limit`` (1-200, default 50) and ``cursor`` (the ``next_cursor`` of the page before)
and answers ``{"items": [...], "next_cursor": "..." | null}``. The cursor is opaque to clients
(base64url of the last row's ``created_at`` and ``id``); the next page is every row strictly older
than it, so rows created while a client walks the list never shift a page: no duplicates, no gaps
(new rows are newer than the first page and show up on a fresh walk).
"""

from __future__ import annotations

import base64
import binascii
import uuid
from datetime import datetime
from typing import Annotated, Any, Generic, TypeVar

from fastapi import Query
from pydantic import BaseModel, Field
from sqlalchemy import tuple_
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.public_api.problems import ApiProblem

__all__ = ["CursorQuery", "LimitQuery", "Page", "decode_cursor", "encode_cursor", "keyset_page"]

T = TypeVar("T")

LimitQuery = Annotated[int, Query(ge=1, le=200, description="Items per page (1-200).")]
CursorQuery = Annotated[
    str | None, Query(max_length=200, description="`next_cursor` of the previous page; none: the first page.")
]


class Page(BaseModel, Generic[T]):
    """One page of a list, newest first."""

    items: list[T]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")


def encode_cursor(created_at: datetime, row_id: uuid.UUID) -> str:
    """The opaque cursor after the row ``(created_at, row_id)``."""
    raw = f"{created_at.isoformat()}|{row_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    """``(created_at, id)`` of a cursor; a cursor this API did not make: :class:`ApiProblem` 400 ``invalid_cursor``."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        when, row_id = raw.split("|")
        at = datetime.fromisoformat(when)
        if at.tzinfo is None:
            raise ValueError("naive")
        return at, uuid.UUID(row_id)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise ApiProblem(400, "invalid_cursor", "the cursor is not one this API gave out") from None


async def keyset_page(
    session: AsyncSession, query: Any, model: Any, *, limit: int, cursor: str | None
) -> tuple[list[Any], str | None]:
    """Run ``query`` (a ``select`` of ``model`` rows, already filtered) for one page: the rows, newest first,
    and the next cursor (``None`` when no row is left). ``model`` has ``created_at`` and ``id`` columns."""
    created, row_id = model.created_at, model.id
    if cursor:
        at, after = decode_cursor(cursor)
        query = query.where(tuple_(created, row_id) < tuple_(at, after))
    rows = list((await session.exec(query.order_by(created.desc(), row_id.desc()).limit(limit + 1))).all())
    if len(rows) <= limit:
        return rows, None
    rows = rows[:limit]
    last = rows[-1]
    return rows, encode_cursor(last.created_at, last.id)
