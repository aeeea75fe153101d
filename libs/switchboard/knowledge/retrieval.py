"""Retrieval: one SQL query per mode, always filtered by tenant and ``is_active``.

Modes (docs/knowledge-base.md#search-modes):

* ``vector``: cosine distance (``<=>``). A tenant with at most ``kb_exact_scan_max_chunks`` active
  chunks (the sum of ``knowledge_sources.chunk_count``, read in the same round trip that sets the
  ``SET LOCAL`` options) is scanned **exactly**: its rows are read through the tenant index into a
  ``MATERIALIZED`` CTE and sorted by distance, which the HNSW index cannot serve (recall 1.0).
  Larger tenants use their own partial HNSW index once the background job has built it
  (:mod:`switchboard.knowledge.vector_index`; exactly scanned until then), ``vector_cosine_ops``,
  ``SET LOCAL enable_sort = off`` so
  the planner cannot fall back to a sort, restored right after), with pgvector 0.8's iterative
  index scan (``hnsw.iterative_scan = relaxed_order``) so the tenant filter cannot starve the
  result (pgvector docs, "Iterative Index Scans"), re-sorted exactly in an outer query. A chunk matches when its cosine
  similarity reaches the threshold. Either way the search itself is one SQL query.
* ``hybrid`` (default): the vector candidates (found as in ``vector`` mode) and the full-text
  candidates (``tsv`` GIN index, an OR of the question's keywords) fused by reciprocal rank fusion
  (Cormack, Clarke & Büttcher, SIGIR 2009: ``score = Σ 1/(k + rank)``, k = 60). A chunk matches when its cosine similarity
  reaches the threshold **or** it contains at least ``kb_min_keyword_coverage`` of the
  question's keywords, so exact words and numbers count.
  The question's graph walk (below) is a third list of the walk's chunks scoring at least
  ``GRAPH_FLOOR`` of its best, weighted ``1 + min(2, entities named - 1 + asks about a part)``: 1
  (like the other two lists) for a question naming one entity, more when it names two (a path
  between them) or asks about a part of what it names ("the body material of the GV-200"):
  when the question names entities of the tenant's graph, the chunks that connect them take the
  lead; a question naming none is fused from the two lists as before. A chunk from the walk
  matches whatever its similarity (``kb_hybrid_graph = false`` leaves the walk out).
* ``graph``: only the walk (:mod:`switchboard.knowledge.graph.walk`, a recursive CTE) from the
  entities the question names (its words and codes matched against the tenant's entity names,
  ``kb_graph_hops`` steps): chunks that state relations between them (the PTFE / chlorine row, the
  valve spec naming its PTFE seats, the PTFE sheet's temperature limit) ranked by how strongly they
  connect them. Nothing when the question names no entity.
* ``neighborhood``: the closest chunk (``hybrid`` without the walk, top 1) and the chunks one hop
  away in the graph from the entities it mentions.
* ``exact``: for part numbers, SKUs and codes. Tokens of the question that contain a digit or an
  inner ``-``/``_``/``.`` (all keywords if there are none) must each occur in the chunk as a whole
  token (a GIN phrase pre-filter, then a case-insensitive regular expression with token
  boundaries), so ``FVAM-2050-B`` never returns a chunk that only has ``FVAM-2050-C``. Matching
  chunks are ordered by cosine similarity.

Only chunks embedded with the same model as the question take part in vector scoring; a tenant
that changed its embedding model re-indexes (``switchboard kb reindex``).
"""

from __future__ import annotations

import functools
import re
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from sqlalchemy import TextClause, text
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import Tenant
from switchboard.errors import TenantNotFound
from switchboard.knowledge.embeddings import EmbeddingConfig, embed_query, resolve_embedding_config
from switchboard.knowledge.graph.extract import (
    asks_about_a_part,
    question_names,
    question_units,
    relation_cues,
)
from switchboard.knowledge.graph.walk import (
    GRAPH_SQL,
    QVEC,
    SEEDS_BY_CHUNK,
    SEEDS_BY_NAME,
    SIMILARITY,
    graph_ctes,
)
from switchboard.knowledge.vector_index import hnsw_index_name, tenant_literal
from switchboard.llm.lexical import tokenize
from switchboard.observability import get_logger
from switchboard.settings import Settings

__all__ = [
    "ChunkHit",
    "SEARCH_MODES",
    "SearchMode",
    "search_chunks",
    "explain_search",
    "keywords",
    "code_tokens",
    "STOPWORDS",
]

log = get_logger(__name__)

SearchMode = Literal["vector", "hybrid", "exact", "graph", "neighborhood"]
SEARCH_MODES: tuple[str, ...] = ("vector", "hybrid", "exact", "graph", "neighborhood")
RRF_K = 60
"""Reciprocal-rank-fusion constant (Cormack et al. 2009)."""
CANDIDATES_PER_LIST = 40
"""Hybrid mode: candidates taken from each of the vector and the full-text lists before fusion."""
GRAPH_CANDIDATES = 20
"""Hybrid and graph modes: chunks kept from the graph walk (best graph score first)."""
GRAPH_FLOOR = 0.25
"""Hybrid mode: graph chunks fused only when their graph score is at least this share of the best
one (a chunk that merely mentions one named entity does not outvote vector and full-text), or when
they are on a path between named entities (``on_path``, :mod:`switchboard.knowledge.graph.walk`); a
chunk about the thing between two named entities (``bridged``: the material between a series and a
chemical) is fused after those, with the weight of one list (the ``limit`` best of them)."""

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers him his how i if in into is it its itself just me more most my no nor not of
    off on once only or other our ours out over own same she should so some such than that the their
    theirs them then there these they this those through to too under until up very was we were what
    when where which while who whom why will with would you your yours yourself please tell know want
    need get got give much many does did can't don't i'm it's there's what's""".split()
)
"""English function words left out of keyword matching (the ``simple`` text-search config keeps them)."""

_CODE_CHARS = re.compile(r"\d|[-_.]")


@dataclass(frozen=True, kw_only=True)
class ChunkHit:
    """One matching chunk, with what an answer needs to cite its source."""

    chunk_id: int
    source_id: uuid.UUID
    document: str
    """The document's filename."""
    page: int | None
    """1-based PDF page the chunk starts on."""
    sheet: str | None
    """Spreadsheet sheet name."""
    score: float
    """Higher is better; ``vector``/``exact``: cosine similarity; ``hybrid``: RRF score scaled to 0..1."""
    similarity: float | None
    """Cosine similarity of chunk and question (``None`` for chunks of another embedding model)."""
    text: str
    attributes: dict[str, Any] = field(default_factory=dict)
    """A table row's place and key columns (``{"row": 3, "keys": {"SKU": "AB-100"}}``); ``{}`` for prose."""

    def to_json_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["source_id"] = str(self.source_id)
        return data


def keywords(query: str) -> list[str]:
    """The question's tokens minus stop words and one-letter words, in order, without repeats."""
    seen: dict[str, None] = {}
    for token in tokenize(query):
        if token not in STOPWORDS and (len(token) > 1 or token.isdigit()):
            seen.setdefault(token, None)
    return list(seen)


def code_tokens(query: str) -> list[str]:
    """Tokens that look like codes (contain a digit or an inner ``-``, ``_``, ``.``)."""
    return [token for token in keywords(query) if _CODE_CHARS.search(token)]


def _token_regex(token: str) -> str:
    """A Postgres ARE matching ``token`` as a whole token (not inside a longer code)."""
    return rf"(?<![[:alnum:]])(?<![[:alnum:]][-_.]){re.escape(token)}(?![[:alnum:]]|[-_.][[:alnum:]])"


def _vector_literal(vector: list[float]) -> str:
    # zeros written without formatting: the offline question embedding is ~40 non-zero values of
    # 1,536, and formatting every one took 0.42 ms a search (0.06 ms so); the text is the same
    return "[" + ",".join([f"{v:.7g}" if v else "0" for v in vector]) + "]"


_MODEL_SOURCES = (
    "SELECT ks.id FROM knowledge_sources ks WHERE ks.tenant_id = :tenant_id AND ks.embedding_model = :model"
)


RERANK_CANDIDATES = 50
"""Exact scan: candidates ranked by the half-precision embedding (at least this many, and twice the
CTE's limit), re-ranked by the exact cosine of the full embeddings."""


def _nearest_cte(name: str, limit_param: str, *, exact: bool, tenant_id: uuid.UUID) -> str:
    """CTE ``name(id, distance)``: the tenant's ``:limit_param`` chunks nearest to ``:qvec``.

    ``exact``: every active chunk of the tenant (never HNSW) ranked by the inner product of its
    normalized half-precision embedding with the normalized question, the best
    ``:rerank_candidates`` re-ranked by the exact cosine distance of the full embeddings. The first
    pass reads ``knowledge_chunk_vectors`` (migration ``0024_chunk_vectors``: only the active chunks'
    ``embedding_half``, two rows a page) instead of ``knowledge_documents`` (one chunk with its text
    and ``tsv`` a page): half the pages, the same values, so the same ranking (the
    coarse pass 2x faster at 100,000 chunks). Otherwise the tenant's own partial
    HNSW index (iterative scan; :mod:`switchboard.knowledge.vector_index`), the tenant written as a
    literal so that the planner can prove the index's ``WHERE tenant_id = '<uuid>'`` on a generic plan.

    The exact scan takes the tenant's sources of the model as one array (an init plan), not as
    ``IN (subquery)``: that one the planner joined as a nested loop over the tenant's sources, each
    loop a bitmap scan of the tenant's whole ``(tenant_id, tsv)`` index entry (19 sources: 19 x ~1.1 ms,
    two thirds of the 30 ms scan at 100,000 chunks; ``loadtests/kb_profile.py``).
    """
    if exact:
        return f"""{name}_coarse AS MATERIALIZED (
    SELECT v.id
    FROM knowledge_chunk_vectors v
    WHERE v.tenant_id = :tenant_id AND v.source_id = ANY(ARRAY({_MODEL_SOURCES}))
    ORDER BY v.embedding_half <#> (SELECT CAST(l2_normalize(CAST(:qvec AS vector)) AS halfvec)), v.id
    LIMIT :rerank_candidates
),
{name} AS MATERIALIZED (
    SELECT d.id, d.embedding <=> {QVEC} AS distance
    FROM {name}_coarse c JOIN knowledge_documents d ON d.id = c.id
    ORDER BY distance, d.id
    LIMIT :{limit_param}
)"""
    return f"""{name} AS MATERIALIZED (
    SELECT d.id, d.embedding <=> {QVEC} AS distance
    FROM knowledge_documents d
    WHERE d.tenant_id = {tenant_literal(tenant_id)} AND d.is_active AND d.source_id IN ({_MODEL_SOURCES})
    ORDER BY d.embedding <=> {QVEC}
    LIMIT :{limit_param}
)"""


_RESTORE_CTE = """restored AS MATERIALIZED (
    SELECT set_config('enable_sort', :restore_sort, true) IS NOT NULL
           AND set_config('plan_cache_mode', :restore_plan_cache, true) IS NOT NULL AS done
)"""
"""Puts back the planner options :data:`_PREPARE_SQL` set (``enable_sort``, ``plan_cache_mode``) from
inside the search statement, so that no round trip of its own is needed after it (not one
``SELECT set_config(...)`` after every vector/hybrid/neighborhood search).
Both options are read before execution starts (``plan_cache_mode`` when the statement is bound,
``enable_sort`` when it is planned), so setting them while it runs changes only later statements.
The final ``SELECT`` of each statement filters on :data:`_RESTORED`, a constant qual: PostgreSQL
evaluates it once, as a one-time filter before the first row, also when the search has no hits."""

_RESTORED = "(SELECT r.done FROM restored r)"

_VECTOR_SQL = """
WITH {RESTORE},
{nearest}
SELECT d.id, d.source_id, s.filename, d.page, d.sheet, d.text, d.attributes,
       1 - nn.distance AS similarity, 1 - nn.distance AS score
FROM nn
JOIN knowledge_documents d ON d.id = nn.id
JOIN knowledge_sources s ON s.id = d.source_id AND s.tenant_id = :tenant_id
WHERE 1 - nn.distance >= :min_similarity AND {RESTORED}
ORDER BY nn.distance, d.id
""".replace("{RESTORE}", _RESTORE_CTE).replace("{RESTORED}", _RESTORED)

_HYBRID_CTES = """
WITH RECURSIVE {RESTORE},
{nearest},
vec_ranked AS (
    SELECT id, row_number() OVER (ORDER BY distance, id) AS rank FROM vec
),
kw AS MATERIALIZED (
    SELECT d.id, ts_rank_cd(d.tsv, q.query) AS text_rank
    FROM knowledge_documents d, websearch_to_tsquery('simple', :or_query) AS q(query)
    WHERE d.tenant_id = :tenant_id AND d.is_active AND d.tsv @@ q.query
    ORDER BY text_rank DESC, d.id
    LIMIT :candidates
),
kw_ranked AS (
    SELECT id, row_number() OVER (ORDER BY text_rank DESC, id) AS rank FROM kw
),
{graph},
gr_ranked AS (
    SELECT id, row_number() OVER (ORDER BY core DESC, score DESC, id) AS rank, core
    FROM (SELECT id, score, bridged, core, row_number() OVER (PARTITION BY core ORDER BY score DESC, id) AS nth
          FROM (SELECT id, score, bridged,
                       score >= :graph_floor * (SELECT max(score) FROM {graph_name}) OR on_path AS core
                FROM {graph_name}) g) g
    WHERE core OR (bridged AND nth <= :limit)  -- a few of the things between, not all their rows
),
graph_weight AS MATERIALIZED (
    SELECT 1.0 + least(greatest(count(*) - 1, 0) + :part_cued, 2) AS w FROM {seeds_name}
),
fused AS (
    SELECT x.id, sum(x.rrf) AS rrf, bool_or(x.from_graph) AS from_graph
    FROM (
        SELECT id, 1.0 / (:rrf_k + rank) AS rrf, false AS from_graph FROM vec_ranked
        UNION ALL SELECT id, 1.0 / (:rrf_k + rank), false FROM kw_ranked
        UNION ALL SELECT id, CASE WHEN core THEN (SELECT w FROM graph_weight) ELSE 1 END / (:rrf_k + rank), true
        FROM gr_ranked
    ) x
    GROUP BY x.id
),
scored AS (
    SELECT d.id, d.source_id, s.filename, d.page, d.sheet, d.text, d.attributes, f.rrf, f.from_graph,
           {SIMILARITY} AS similarity,
           (SELECT count(*) FROM unnest(CAST(:terms AS text[])) AS t(term)
             WHERE d.tsv @@ phraseto_tsquery('simple', t.term))::float / :n_terms AS coverage
    FROM fused f
    JOIN knowledge_documents d ON d.id = f.id
    JOIN knowledge_sources s ON s.id = d.source_id AND s.tenant_id = :tenant_id
)""".replace("{SIMILARITY}", SIMILARITY).replace("{RESTORE}", _RESTORE_CTE)
"""Hybrid mode's CTEs up to ``scored`` (the fused candidates with similarity and keyword coverage);
``{graph}`` is the walk's CTEs (or empty ones) named ``{seeds_name}`` and ``{graph_name}``."""

_HYBRID_MATCHES = (
    "similarity >= :min_similarity OR (:n_terms_real > 0 AND coverage >= :min_coverage) OR from_graph"
)
"""Which fused candidates are hits (module docstring, ``hybrid``)."""

_HYBRID_SQL = (
    _HYBRID_CTES
    + f"""
SELECT id, source_id, filename, page, sheet, text, attributes, similarity,
       rrf * (:rrf_k + 1) / (2.0 + (SELECT w FROM graph_weight)) AS score
FROM scored
WHERE ({_HYBRID_MATCHES}) AND {{RESTORED}}
ORDER BY rrf DESC, id
LIMIT :limit
"""
).replace("{RESTORED}", _RESTORED)

_NEIGHBORHOOD_SQL = (
    _HYBRID_CTES.replace("{graph}", "{first_graph},\n{graph}")
    + f""",
closest AS MATERIALIZED (
    SELECT id, source_id, filename, page, sheet, text, attributes, similarity
    FROM scored
    WHERE {_HYBRID_MATCHES}
    ORDER BY rrf DESC, id
    LIMIT 1
)
SELECT * FROM (
    SELECT c.id, c.source_id, c.filename, c.page, c.sheet, c.text, c.attributes, c.similarity,
           1.0 AS score, 0 AS leg
    FROM closest c
    UNION ALL
    (SELECT d.id, d.source_id, s.filename, d.page, d.sheet, d.text, d.attributes, {{similarity}},
            g.score / (SELECT max(score) FROM graph), 1
     FROM graph g
     JOIN knowledge_documents d ON d.id = g.id
     JOIN knowledge_sources s ON s.id = d.source_id AND s.tenant_id = :tenant_id
     WHERE g.id <> (SELECT id FROM closest)
     ORDER BY g.score DESC, d.id
     LIMIT :neighbours)
) hits
WHERE {{RESTORED}}
ORDER BY leg, score DESC, id
"""
).replace("{RESTORED}", _RESTORED)
"""``neighborhood`` mode in one statement: ``closest`` is hybrid's best hit without the walk (its
empty graph CTEs named ``first_seeds``/``first_graph``), then the walk one hop from the entities
``closest`` mentions (:data:`~switchboard.knowledge.graph.walk.SEEDS_BY_CHUNK`); the closest chunk
first (score 1), then up to ``:neighbours`` of the walk's chunks other than it, best first. No rows
when hybrid finds nothing. One statement, not two with a Python step between them (the hybrid top
1, then the graph walk from its chunk)."""


def _exact_sql(count: int) -> str:
    """``exact`` mode for ``count`` code tokens: the GIN phrase pre-filter, then the token regexes.

    The regexes are ``regexp_like(text, pattern, 'i')``, not the ``~*`` operator: for ``~*`` the
    planner estimates the selectivity by running each pattern over the column's statistics (the
    histogram of ~900-character chunk texts), 6.4 ms of planning for 0.1 ms of execution at 100,000
    chunks; a function has no estimator to run. Same regular expressions,
    same matches.
    """
    prefilter = " AND ".join(f"d.tsv @@ phraseto_tsquery('simple', :tok{i})" for i in range(count))
    verify = " AND ".join(f"regexp_like(d.text, :pat{i}, 'i')" for i in range(count))
    return f"""
SELECT d.id, d.source_id, s.filename, d.page, d.sheet, d.text, d.attributes,
       {SIMILARITY} AS similarity, coalesce({SIMILARITY}, 0) AS score
FROM knowledge_documents d
JOIN knowledge_sources s ON s.id = d.source_id AND s.tenant_id = :tenant_id
WHERE d.tenant_id = :tenant_id AND d.is_active AND {prefilter} AND {verify}
ORDER BY score DESC, d.id
LIMIT :limit
"""


_PREPARE_SQL = """
WITH previous AS MATERIALIZED (
    SELECT current_setting('enable_sort') AS enable_sort, current_setting('plan_cache_mode') AS plan_cache_mode
),
counted AS MATERIALIZED (
    SELECT coalesce(sum(ks.chunk_count), 0) AS chunks,
           coalesce((SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(:hnsw_index)), false)
               AS hnsw_ready
    FROM knowledge_sources ks
    WHERE ks.tenant_id = :tenant_id AND ks.is_active
),
chosen AS MATERIALIZED (
    SELECT c.chunks, c.chunks > :max_exact AND c.hnsw_ready AS use_hnsw FROM counted c
)
SELECT c.chunks, c.use_hnsw, p.enable_sort AS previous_sort, p.plan_cache_mode AS previous_plan_cache_mode,
       (SELECT t.settings_extensions FROM tenants t WHERE t.id = :tenant_id) AS settings_extensions,
       set_config('hnsw.iterative_scan', 'relaxed_order', true) AS iterative_scan,
       set_config('hnsw.ef_search', :ef_search, true) AS ef_search,
       set_config('plan_cache_mode', 'force_generic_plan', true) AS plan_cache_mode,
       set_config('enable_sort', CASE WHEN c.use_hnsw THEN 'off' ELSE p.enable_sort END, true) AS enable_sort
FROM chosen c, previous p
"""
"""One round trip before a vector/hybrid search: the tenant row's ``settings_extensions`` (its
embedding configuration; ``NULL``: no such tenant), so the tenant is not read in a round trip of its
own, the tenant's active chunk count and whether its HNSW index (:func:`hnsw_index_name`) exists and
is valid, which pick the exact scan or HNSW (HNSW: above ``kb_exact_scan_max_chunks`` with a valid
index; a tenant above it whose index is not built yet is scanned exactly), and the transaction-local options (``set_config(..., true)`` is ``SET LOCAL``):
HNSW's iterative scan and ``ef_search``, and for HNSW ``enable_sort = off``, so that the planner
cannot swap the index for "read the tenant's rows and sort" (the previous value is read first,
in its own CTE, to be restored after the search), and ``plan_cache_mode = force_generic_plan``
(restored after the search with ``enable_sort``): the driver prepares each statement once per
connection, so the search statement is planned once per connection and text (exact scan or HNSW,
with or without the walk) and its plan reused, instead of planned for every search (hybrid: 2.9 ms
of planning at 100,000 chunks; its statement 13.8 -> 10.1 ms p50 with identical hits,
``loadtests/kb_search_ab.py``). That plan cannot depend on the tenant or the question, and none of these statements'
plans should: the CTEs are ``MATERIALIZED``, the tenant's rows come through its indexes, and the
question vector is an init plan (``(SELECT CAST(:qvec AS vector))``, :data:`QVEC`), computed once per
execution. (Without that init plan a generic plan would parse the 1,536
numbers of ``CAST(:qvec AS vector)`` for every row it compares, ~50 ms a hybrid search.)"""


@functools.lru_cache(maxsize=256)
def _statement(sql: str) -> TextClause:
    """``text(sql)``, built once per statement text: the construct scans the whole text for its
    ``:name`` parameters with a regular expression (a search statement is 3-6 KB), and it is
    immutable, so one object serves every search (texts: per mode and strategy, the HNSW ones per
    tenant, ``exact`` per token count)."""
    return text(sql)


@dataclass(frozen=True, kw_only=True)
class _Prepared:
    sql: str
    params: dict[str, Any]
    strategy: Literal["exact_scan", "hnsw", "keyword", "graph"]
    tenant_chunks: int | None
    restore: dict[str, str] | None
    """``vector``/``hybrid``/``neighborhood``: the ``enable_sort`` and ``plan_cache_mode`` values the
    statement itself puts back when it runs (:data:`_RESTORE_CTE`; also in its parameters
    ``restore_sort`` / ``restore_plan_cache``); ``None``: the statement changes no option."""
    threshold: float
    embedding: EmbeddingConfig


def _no_graph_ctes(seeds: str = "seeds", graph: str = "graph") -> str:
    return f"""{seeds} AS (SELECT NULL::bigint AS id, NULL::text AS kind, NULL::text AS unit WHERE false),
{graph} AS (SELECT NULL::bigint AS id, NULL::numeric AS score, NULL::boolean AS on_path, NULL::boolean AS bridged WHERE false)"""


_NO_GRAPH_CTES = _no_graph_ctes()
"""Hybrid without the walk (no names to seed it: ``use_graph`` off, ``neighborhood``'s first leg):
empty ``seeds`` and ``graph`` instead of the walk's CTEs, which an empty ``:names`` makes return
nothing anyway but which the planner would still plan (the hybrid statement's planning was ~4 ms,
the vector one's ~0.7 ms)."""


async def _prepare(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    query: str,
    mode: SearchMode,
    limit: int,
    settings: Settings,
    embedding: EmbeddingConfig | None,
    min_similarity: float | None,
    use_graph: bool | None = None,
    neighbours: int | None = None,
) -> _Prepared | None:
    """Validate, embed the question and pick the query; ``None`` when the question has no words.

    ``neighbours`` (with ``mode="hybrid"``, ``limit=1``, ``use_graph=False``): the ``neighborhood``
    statement (:data:`_NEIGHBORHOOD_SQL`) instead, the closest chunk and up to ``neighbours`` chunks
    one hop away from it.

    Leaves ``SET LOCAL`` options in the session's transaction (``plan_cache_mode``, and
    ``enable_sort = off`` for HNSW) that the search statement puts back when it runs
    (:data:`_RESTORE_CTE`); a caller that does not run it calls :func:`_restore`.
    """
    if mode not in SEARCH_MODES or mode == "neighborhood":
        raise ValueError(f"unknown search mode {mode!r}: use {', '.join(SEARCH_MODES)}")
    if not 1 <= limit <= 50:
        raise ValueError(f"limit must be 1-50, got {limit}")
    vector_leg = mode in ("vector", "hybrid")
    if embedding is None and not (vector_leg and tokenize(query)):
        embedding = await _tenant_embedding(session, tenant_id, settings)
    terms = keywords(query)
    params: dict[str, Any] = {"tenant_id": tenant_id, "limit": limit}
    strategy: Literal["exact_scan", "hnsw", "keyword", "graph"] = "keyword"
    tenant_chunks: int | None = None
    restore: dict[str, str] | None = None
    if mode == "exact":
        tokens = code_tokens(query) or terms
        if not tokens:
            return None
        for index, token in enumerate(tokens):
            params[f"tok{index}"] = token
            params[f"pat{index}"] = _token_regex(token)
        sql = _exact_sql(len(tokens))
    elif mode == "graph":
        if not tokenize(query):
            return None
        strategy = "graph"
        sql = GRAPH_SQL.replace("{ctes}", graph_ctes(SEEDS_BY_NAME)).replace("{similarity}", SIMILARITY)
        params.update(_graph_params(query, settings, use_graph=True))
    else:
        if not tokenize(query):
            return None
        prepared = (
            await session.exec(
                _statement(_PREPARE_SQL),
                params={
                    "tenant_id": tenant_id,
                    "ef_search": str(int(settings.kb_hnsw_ef_search)),
                    "max_exact": settings.kb_exact_scan_max_chunks,
                    "hnsw_index": hnsw_index_name(tenant_id),
                },
            )
        ).one()
        if embedding is None:  # the tenant row came with the chunk count (one round trip fewer)
            if prepared.settings_extensions is None:
                raise TenantNotFound(str(tenant_id))
            tenant = Tenant(id=tenant_id, settings_extensions=prepared.settings_extensions)
            embedding = resolve_embedding_config(settings, tenant)
        tenant_chunks = int(prepared.chunks)
        exact_scan = not prepared.use_hnsw
        strategy = "exact_scan" if exact_scan else "hnsw"
        # always both, also when unchanged: one statement text (one cached plan) per strategy
        restore = {
            "enable_sort": prepared.previous_sort,
            "plan_cache_mode": prepared.previous_plan_cache_mode,
        }
        params.update(
            restore_sort=prepared.previous_sort, restore_plan_cache=prepared.previous_plan_cache_mode
        )
        params["min_similarity"] = float(
            embedding.min_similarity if min_similarity is None else min_similarity
        )
        if mode == "vector":
            sql = _VECTOR_SQL.replace(
                "{nearest}", _nearest_cte("nn", "limit", exact=exact_scan, tenant_id=tenant_id)
            )
        elif neighbours is not None:
            sql = (
                _NEIGHBORHOOD_SQL.replace(
                    "{nearest}", _nearest_cte("vec", "candidates", exact=exact_scan, tenant_id=tenant_id)
                )
                .replace("{first_graph}", _no_graph_ctes("first_seeds", "first_graph"))
                .replace("{graph}", graph_ctes(SEEDS_BY_CHUNK))
                .replace("{seeds_name}", "first_seeds")
                .replace("{graph_name}", "first_graph")
                .replace("{similarity}", SIMILARITY)
            )
            # the walk: one hop from the closest chunk's entities (no names: they seed nothing here)
            params.update(_graph_params(query, settings, use_graph=True), names=[], hops=1)
            params["neighbours"] = neighbours
        else:
            sql = _HYBRID_SQL.replace(
                "{nearest}", _nearest_cte("vec", "candidates", exact=exact_scan, tenant_id=tenant_id)
            )
            graph_params = _graph_params(query, settings, use_graph=use_graph)
            sql = (
                sql.replace("{graph}", graph_ctes(SEEDS_BY_NAME) if graph_params["names"] else _NO_GRAPH_CTES)
                .replace("{seeds_name}", "seeds")
                .replace("{graph_name}", "graph")
            )
            params.update(graph_params)
        if mode == "hybrid":
            params.update(
                candidates=max(CANDIDATES_PER_LIST, limit),
                or_query=" or ".join(f'"{term}"' for term in terms),
                terms=terms,
                n_terms=float(max(1, len(terms))),
                n_terms_real=len(terms),
                min_coverage=float(settings.kb_min_keyword_coverage),
                rrf_k=RRF_K,
            )
    assert embedding is not None  # read above: before the mode's query, or with the chunk count
    threshold = embedding.min_similarity if min_similarity is None else min_similarity
    params["model"] = embedding.model
    # The lexical embedding counts every shared word, so "the", "is", "what" would make any two
    # sentences look alike: embed only the question's keywords (calibration: docs/knowledge-base.md#embedding-model).
    query_text = " ".join(terms) if embedding.is_lexical and terms else query
    params["qvec"] = _vector_literal(await embed_query(embedding, query_text))
    if strategy == "exact_scan":
        params["rerank_candidates"] = max(RERANK_CANDIDATES, 2 * params.get("candidates", limit))
    return _Prepared(
        sql=sql,
        params=params,
        strategy=strategy,
        tenant_chunks=tenant_chunks,
        restore=restore,
        threshold=float(threshold),
        embedding=embedding,
    )


async def _tenant_embedding(
    session: AsyncSession, tenant_id: uuid.UUID, settings: Settings
) -> EmbeddingConfig:
    """The tenant's embedding configuration from its row; raises ``TenantNotFound``."""
    tenant = await session.get(Tenant, tenant_id)
    if tenant is None:
        raise TenantNotFound(str(tenant_id))
    return resolve_embedding_config(settings, tenant)


def _graph_params(query: str, settings: Settings, *, use_graph: bool | None) -> dict[str, Any]:
    """Parameters of the graph walk: the names the question may use for entities (none when the walk
    is off: ``use_graph`` false, or ``None`` and ``kb_hybrid_graph`` off), hops, cued relations, units."""
    enabled = settings.kb_hybrid_graph if use_graph is None else use_graph
    return {
        "names": question_names(query) if enabled else [],
        "hops": settings.kb_graph_hops,
        "cued": relation_cues(query),
        "units": question_units(query),
        "graph_candidates": GRAPH_CANDIDATES,
        "graph_floor": GRAPH_FLOOR,
        "part_cued": int(asks_about_a_part(query)),
    }


async def _restore(session: AsyncSession, prepared: _Prepared) -> None:
    """Put back the planner options :data:`_PREPARE_SQL` changed when the search statement did not run
    (``EXPLAIN`` without ``ANALYZE``; a statement that runs puts them back itself): one round trip, or none."""
    if prepared.restore:
        calls = ", ".join(f"set_config('{name}', :{name}, true)" for name in prepared.restore)
        await session.exec(text(f"SELECT {calls}"), params=prepared.restore)


async def search_chunks(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    query: str,
    mode: SearchMode = "hybrid",
    limit: int = 5,
    settings: Settings,
    embedding: EmbeddingConfig | None = None,
    min_similarity: float | None = None,
    use_graph: bool | None = None,
) -> list[ChunkHit]:
    """Find the tenant's chunks that answer ``query``; nothing when nothing is relevant enough.

    Round trips: ``vector``/``hybrid``/``neighborhood`` read the tenant's chunk count while setting
    the planner options, then run the one search query (which puts the options back itself);
    ``exact`` and ``graph`` run the one query. A tenant row lookup comes first when ``embedding`` is
    omitted (``vector``/``hybrid``/``neighborhood``: only when the question has no words).

    Args:
        session: open session; its current transaction's planner options are as they were when
            this returns (the search sets and restores them).
        tenant_id: the tenant established by authentication (never taken from a model).
        query: the question, or a code for ``exact`` mode.
        mode: ``vector``, ``hybrid`` (default), ``exact``, ``graph`` or ``neighborhood`` (see the
            module docstring).
        limit: most chunks returned (1-50).
        settings: thresholds, ``hnsw.ef_search``, ``kb_exact_scan_max_chunks``, the graph walk's
            ``kb_graph_hops`` and ``kb_hybrid_graph``, and the embedding fallback policy.
        embedding: the tenant's embedding configuration (resolved from the tenant row when omitted).
        min_similarity: override of the cosine-similarity threshold.
        use_graph: ``hybrid`` only: fuse the graph walk (``None``: ``kb_hybrid_graph``).

    Returns:
        Up to ``limit`` hits, best first; empty when no chunk passes the threshold (``graph``: when
        the question names no entity of the tenant's graph).

    Raises:
        ValueError: unknown mode or ``limit`` outside 1-50.
        TenantNotFound: ``embedding`` omitted and no such tenant.
        EmbeddingFailed: the embedding provider failed for the question.
    """
    if mode == "neighborhood":
        return await _neighborhood(
            session,
            tenant_id=tenant_id,
            query=query,
            limit=limit,
            settings=settings,
            embedding=embedding,
            min_similarity=min_similarity,
        )
    prepared = await _prepare(
        session,
        tenant_id=tenant_id,
        query=query,
        mode=mode,
        limit=limit,
        settings=settings,
        embedding=embedding,
        min_similarity=min_similarity,
        use_graph=use_graph,
    )
    if prepared is None:
        return []
    hits = await _run(session, prepared)
    log.info(
        "knowledge_searched",
        tenant_id=str(tenant_id),
        mode=mode,
        hits=len(hits),
        strategy=prepared.strategy,
        tenant_chunks=prepared.tenant_chunks,
        embedding_model=prepared.embedding.model,
        threshold=prepared.threshold,
    )
    return hits


async def _run(session: AsyncSession, prepared: _Prepared) -> list[ChunkHit]:
    rows = (await session.exec(_statement(prepared.sql), params=prepared.params)).all()
    return [
        ChunkHit(
            chunk_id=row.id,
            source_id=row.source_id,
            document=row.filename,
            page=row.page,
            sheet=row.sheet,
            score=round(float(row.score), 6),
            similarity=None if row.similarity is None else round(float(row.similarity), 6),
            text=row.text,
            attributes=row.attributes or {},
        )
        for row in rows
    ]


async def _neighborhood(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    query: str,
    limit: int,
    settings: Settings,
    embedding: EmbeddingConfig | None,
    min_similarity: float | None,
) -> list[ChunkHit]:
    """``neighborhood`` mode: the closest chunk, then the chunks one hop away from its entities.

    One statement (:data:`_NEIGHBORHOOD_SQL`) after the prepare round trip.
    """
    if not 1 <= limit <= 50:
        raise ValueError(f"limit must be 1-50, got {limit}")
    prepared = await _prepare(
        session,
        tenant_id=tenant_id,
        query=query,
        mode="hybrid",
        limit=1,
        settings=settings,
        embedding=embedding,
        min_similarity=min_similarity,
        use_graph=False,
        neighbours=limit - 1,
    )
    if prepared is None:
        if embedding is None:  # no words: still an unknown tenant is an error
            await _tenant_embedding(session, tenant_id, settings)
        return []
    hits = await _run(session, prepared)
    log.info(
        "knowledge_searched",
        tenant_id=str(tenant_id),
        mode="neighborhood",
        hits=len(hits),
        strategy=prepared.strategy,
        seed_chunk=hits[0].chunk_id if hits else None,
        embedding_model=prepared.embedding.model,
    )
    return hits


async def explain_search(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    query: str,
    mode: SearchMode = "hybrid",
    limit: int = 5,
    settings: Settings,
    embedding: EmbeddingConfig | None = None,
    analyze: bool = False,
) -> tuple[str, list[str]]:
    """The strategy and the PostgreSQL plan of the query :func:`search_chunks` would run.

    Args:
        analyze: run it (``EXPLAIN ANALYZE``) to get timings; otherwise only plan it.
        Other arguments: as for :func:`search_chunks`.

    Returns:
        ``(strategy, plan lines)``: strategy ``exact_scan`` or ``hnsw`` (vector, hybrid) or
        ``keyword`` (exact mode); no plan lines when the question has no words.

    Raises:
        The same errors as :func:`search_chunks`.
    """
    prepared = await _prepare(
        session,
        tenant_id=tenant_id,
        query=query,
        mode=mode,
        limit=limit,
        settings=settings,
        embedding=embedding,
        min_similarity=None,
    )
    if prepared is None:
        return "keyword", []
    explain = "EXPLAIN (ANALYZE, BUFFERS) " if analyze else "EXPLAIN "
    rows = (await session.exec(text(explain + prepared.sql), params=prepared.params)).all()
    if not analyze:  # not run: the statement did not put the options back
        await _restore(session, prepared)
    return prepared.strategy, [row[0] for row in rows]
