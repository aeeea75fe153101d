"""Knowledge search for the ``search_knowledge_base`` tool.

Postgres full-text search over ``knowledge_documents`` (filtered by tenant and ``is_active``),
behind the signature of the knowledge feature's ``search_chunks`` so the tool does not change
when that retrieval (vector + hybrid ranking) takes over.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import text
from sqlmodel.ext.asyncio.session import AsyncSession

__all__ = ["SearchMode", "KnowledgeHit", "search_chunks"]

SearchMode = Literal["vector", "hybrid", "exact"]
_WORD_RE = re.compile(r"[\w-]+", re.UNICODE)


@dataclass(frozen=True, kw_only=True)
class KnowledgeHit:
    """One matching chunk."""

    chunk_id: int
    document: str
    """Filename of the source document."""
    page: int | None
    score: float
    """Higher is better (``ts_rank`` for full-text, 1.0 for an exact substring match)."""
    text: str


async def search_chunks(
    session: AsyncSession, *, tenant_id: uuid.UUID, query: str, mode: SearchMode = "hybrid", limit: int = 5
) -> list[KnowledgeHit]:
    """The tenant's active chunks matching ``query``, best first.

    ``exact`` mode finds the query as a case-insensitive substring (part numbers, SKUs);
    ``hybrid`` and ``vector`` use full-text search (``simple`` config) with the query's words OR-ed.

    Args:
        tenant_id: the authenticated tenant (never a model's choice).
        query: 1-500 characters.
        limit: 1-50 hits.

    Raises:
        ValueError: unknown mode or limit outside 1-50.
    """
    if mode not in ("vector", "hybrid", "exact"):
        raise ValueError(f"unknown search mode {mode!r}: use vector, hybrid or exact")
    if not 1 <= limit <= 50:
        raise ValueError(f"limit must be 1-50, got {limit}")
    base = """
        SELECT d.id, s.filename, d.page, d.text, {score} AS score
        FROM knowledge_documents d JOIN knowledge_sources s ON s.id = d.source_id
        WHERE d.tenant_id = :tenant_id AND d.is_active AND s.is_active AND {match}
        ORDER BY score DESC, d.id LIMIT :limit
    """
    params: dict[str, object] = {"tenant_id": tenant_id, "limit": limit}
    if mode == "exact":
        params["pattern"] = "%" + query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        sql = base.format(score="1.0", match="d.text ILIKE :pattern")
    else:
        words = [w.lower() for w in _WORD_RE.findall(query) if len(w) > 1 or w.isdigit()]
        if not words:
            return []
        # quoted lexemes: hyphenated codes stay one token in the 'simple' config
        params["tsquery"] = " | ".join("'" + w.replace("'", "") + "'" for w in dict.fromkeys(words))
        sql = base.format(
            score="ts_rank(d.tsv, to_tsquery('simple', :tsquery))",
            match="d.tsv @@ to_tsquery('simple', :tsquery)",
        )
    rows = (await session.exec(text(sql), params=params)).all()  # type: ignore[call-overload]
    return [
        KnowledgeHit(chunk_id=row[0], document=row[1], page=row[2], text=row[3], score=float(row[4]))
        for row in rows
    ]
