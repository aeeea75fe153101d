"""The graph walk in SQL: a recursive CTE from seed entities over typed relations, scoring chunks.

Seeds are the tenant's entities a question names (its words and codes matched against
``kg_entities.norm_name``, :func:`~switchboard.knowledge.graph.extract.question_names`), or the
entities of one chunk (``neighborhood`` mode). From each seed the walk follows relations in both
directions up to ``hops`` steps (an ``equivalent_of`` step is free: an alias is the same thing),
never onwards from a range (two series sharing a temperature limit are not related), never back
through an entity it has passed, and never across a
compatibility or ``made_of`` relation into an entity of a kind the question already named another
of, unless it is one the question names or an alias of one (asked about chlorine, it does not wander
to ammonia's compatibility rows; asked about PTFE, not to EPDM's; asked about HFC, it reaches the
rows of water-glycol fluid, which a glossary says HFC is). Scores:

* each entity gets ``w = Σ over seeds 1 / (1 + hops from that seed)`` (a seed itself: 1), plus 1
  for a range in a unit the question states (``180 °C`` makes every °C range relevant);
* each relation walked scores ``w(subject) × w(object)``, doubled when the question's words cue
  its type (``compatible`` → compatibility, a temperature → ``rated_for``), for the chunk it was
  read from, a quarter of that when its subject is a product the question does not name (a parts
  list row restating its series' material: ``UNNAMED_PRODUCT``); each seed or alias of a seed
  mentioned in a chunk adds 0.5;
* a chunk's graph score is the sum; the best ``:graph_candidates`` active chunks are kept, each
  with ``on_path``: it states a relation between two things the question names (or their aliases:
  the row of the named material and the named medium, the glossary line that says the question's
  word is another name for a table's term). Hybrid mode keeps such a chunk however small its score
  next to a chunk that mentions everything (a data sheet);
* and ``bridged``: it states a fact about a *bridge* (an entity, not a product or a range, one step
  from seeds of two kinds: the material between a named series and a named chemical; when there is
  none, what a named series or product is ``made_of``: "the cover material of the OS-8") and a named
  entity, a range or a standard (the bridge's row with the chemical, its data sheet). Hybrid mode
  keeps such a chunk too, ranked after the others and without the graph's extra weight.

So a chunk that connects what the question names (the PTFE/chlorine row; the valve spec naming
the seat material) outranks one that touches a single seed. Everything is filtered by
``:tenant_id``: seeds are the tenant's entities, relations and chunks are checked again.
"""

from __future__ import annotations

__all__ = [
    "SEEDS_BY_NAME",
    "SEEDS_BY_CHUNK",
    "QVEC",
    "SIMILARITY",
    "graph_ctes",
    "GRAPH_SQL",
    "RELATIONS_SQL",
]

SEEDS_BY_NAME = """seeds AS MATERIALIZED (
    SELECT e.id, e.kind, e.attributes->>'unit' AS unit FROM kg_entities e
    WHERE e.tenant_id = :tenant_id AND e.norm_name = ANY(CAST(:names AS text[]))
)"""
"""Seeds: the tenant's entities whose normalized name is among ``:names``."""

SEEDS_BY_CHUNK = """seeds AS MATERIALIZED (
    SELECT e.id, e.kind, e.unit
    FROM (SELECT * FROM kg_mentions m WHERE m.chunk_id = (SELECT id FROM closest) OFFSET 0) m
    CROSS JOIN LATERAL (SELECT e.id, e.kind, e.attributes->>'unit' AS unit FROM kg_entities e
                        WHERE e.id = m.entity_id OFFSET 0) e
    WHERE m.tenant_id = :tenant_id AND e.kind <> 'range'
)"""
"""Seeds: the entities (not ranges) mentioned by the chunk of the statement's ``closest`` CTE
(``neighborhood`` mode: hybrid's best hit, in the same statement)."""

UNNAMED_PRODUCT = 0.25
"""Share of its score a relation keeps when its subject is a product the question does not name (a
row of a parts list restating its series' material): the series' own specification says it first."""

_WALK = """seed_names AS MATERIALIZED (  -- the seeds and their direct aliases
    SELECT id FROM seeds
    UNION SELECT r.object_id FROM seeds s
    CROSS JOIN LATERAL (SELECT * FROM kg_relations r WHERE r.subject_id = s.id OFFSET 0) r
    WHERE r.tenant_id = :tenant_id AND r.relation = 'equivalent_of'
    UNION SELECT r.subject_id FROM seeds s
    CROSS JOIN LATERAL (SELECT * FROM kg_relations r WHERE r.object_id = s.id OFFSET 0) r
    WHERE r.tenant_id = :tenant_id AND r.relation = 'equivalent_of'
),
walk(origin, entity_id, kind, unit, depth, rel_id, chunk_id, relation, subject_id, object_id,
     s_kind, s_unit, o_kind, o_unit, path) AS (
    SELECT s.id, s.id, s.kind, s.unit, 0, NULL::bigint, NULL::bigint, NULL::text, NULL::bigint,
           NULL::bigint, NULL::text, NULL::text, NULL::text, NULL::text, ARRAY[s.id]
    FROM seeds s
    UNION ALL
    SELECT w.origin, n.other, n.kind, n.unit, w.depth + n.step, n.rel_id, n.chunk_id, n.relation,
           n.subject_id, n.object_id, n.s_kind, n.s_unit, n.o_kind, n.o_unit, w.path || n.other
    FROM walk w
    CROSS JOIN LATERAL (  -- each step an index lookup by entity; the OFFSET 0 fences keep it so:
        -- the tenant filter applied inside would let the planner read the tenant's relations instead
        -- (a tenant whose catalogue is newer than the table's statistics counts as one row)
        SELECT r.id AS rel_id, r.chunk_id, r.relation, r.object_id AS other, o.kind, o.unit,
               w.entity_id AS subject_id, r.object_id, w.kind AS s_kind, w.unit AS s_unit,
               o.kind AS o_kind, o.unit AS o_unit,
               CASE WHEN r.relation = 'equivalent_of' THEN 0 ELSE 1 END AS step
        FROM (SELECT * FROM kg_relations r WHERE r.subject_id = w.entity_id OFFSET 0) r
        CROSS JOIN LATERAL (SELECT e.kind, e.attributes->>'unit' AS unit FROM kg_entities e
                            WHERE e.id = r.object_id OFFSET 0) o
        WHERE r.tenant_id = :tenant_id
        UNION ALL
        SELECT r.id, r.chunk_id, r.relation, r.subject_id, o.kind, o.unit,
               r.subject_id, w.entity_id, o.kind, o.unit, w.kind, w.unit,
               CASE WHEN r.relation = 'equivalent_of' THEN 0 ELSE 1 END
        FROM (SELECT * FROM kg_relations r WHERE r.object_id = w.entity_id OFFSET 0) r
        CROSS JOIN LATERAL (SELECT e.kind, e.attributes->>'unit' AS unit FROM kg_entities e
                            WHERE e.id = r.subject_id OFFSET 0) o
        WHERE r.tenant_id = :tenant_id
    ) n
    WHERE w.depth + n.step <= :hops AND cardinality(w.path) <= :hops + 2 AND w.kind <> 'range'
      AND NOT n.other = ANY(w.path)
      AND (n.relation NOT IN ('compatible_with', 'incompatible_with', 'made_of')
           OR n.other IN (SELECT id FROM seed_names) OR n.kind NOT IN (SELECT kind FROM seeds))
),
reach AS (
    SELECT origin, entity_id, min(depth) AS depth FROM walk GROUP BY origin, entity_id
),
weights AS MATERIALIZED (
    SELECT entity_id, sum(1.0 / (1 + depth)) AS w FROM reach GROUP BY entity_id
),
edges AS MATERIALIZED (  -- each relation walked, with what scoring needs of its two ends
    SELECT DISTINCT rel_id, chunk_id, relation, subject_id, object_id, s_kind, s_unit, o_kind, o_unit
    FROM walk WHERE rel_id IS NOT NULL
),
named AS MATERIALIZED (  -- the seeds and their aliases (reached by equivalent_of alone)
    SELECT DISTINCT entity_id AS id FROM reach WHERE depth = 0
),
between AS MATERIALIZED (  -- one step from seeds of two kinds: the thing between them (a series' material)
    SELECT w.entity_id AS id FROM walk w JOIN seeds s ON s.id = w.origin
    WHERE w.depth = 1 AND w.entity_id NOT IN (SELECT id FROM named) AND w.kind NOT IN ('product', 'range')
    GROUP BY w.entity_id HAVING count(DISTINCT s.kind) >= 2
),
bridges AS MATERIALIZED (  -- else what a named series is made of ("the cover material of the OS-8")
    SELECT id FROM between
    UNION SELECT w.entity_id FROM walk w
    WHERE NOT EXISTS (SELECT 1 FROM between) AND w.depth = 1 AND w.relation = 'made_of'
      AND w.subject_id = w.origin AND w.kind NOT IN ('product', 'range')
      AND w.entity_id NOT IN (SELECT id FROM named)
),
edge_scores AS (
    SELECT e.chunk_id,
           (coalesce(ws.w, 0) + CASE WHEN e.s_kind = 'range' AND e.s_unit = ANY(CAST(:units AS text[]))
                                     THEN 1 ELSE 0 END)
         * (coalesce(wo.w, 0) + CASE WHEN e.o_kind = 'range' AND e.o_unit = ANY(CAST(:units AS text[]))
                                     THEN 1 ELSE 0 END)
         * CASE WHEN e.relation = ANY(CAST(:cued AS text[])) THEN 2 ELSE 1 END
         * CASE WHEN e.s_kind = 'product' AND e.subject_id NOT IN (SELECT id FROM named)
                THEN {UNNAMED_PRODUCT} ELSE 1 END AS score,
           (e.subject_id IN (SELECT id FROM named) AND e.object_id IN (SELECT id FROM named)) AS on_path,
           (e.subject_id IN (SELECT id FROM bridges)
            AND (e.object_id IN (SELECT id FROM named) OR e.o_kind IN ('range', 'standard'))
            OR e.object_id IN (SELECT id FROM bridges)
            AND (e.subject_id IN (SELECT id FROM named) OR e.s_kind IN ('range', 'standard'))) AS bridged
    FROM edges e
    LEFT JOIN weights ws ON ws.entity_id = e.subject_id
    LEFT JOIN weights wo ON wo.entity_id = e.object_id
),
mention_scores AS (
    SELECT m.chunk_id, 0.5 AS score, false AS on_path, false AS bridged
    FROM named s
    CROSS JOIN LATERAL (SELECT * FROM kg_mentions m WHERE m.entity_id = s.id OFFSET 0) m
    WHERE m.tenant_id = :tenant_id
),
scores AS MATERIALIZED (
    SELECT g.chunk_id, sum(g.score) AS score, bool_or(g.on_path) AS on_path, bool_or(g.bridged) AS bridged
    FROM (SELECT chunk_id, score, on_path, bridged FROM edge_scores
          UNION ALL SELECT chunk_id, score, on_path, bridged FROM mention_scores) g
    GROUP BY g.chunk_id
),
graph AS MATERIALIZED (
    SELECT g.chunk_id AS id, g.score, g.on_path, g.bridged
    FROM scores g
    CROSS JOIN LATERAL (SELECT d.tenant_id, d.is_active FROM knowledge_documents d
                        WHERE d.id = g.chunk_id OFFSET 0) d
    WHERE d.tenant_id = :tenant_id AND d.is_active
    ORDER BY g.score DESC, g.chunk_id
    LIMIT :graph_candidates
)"""


_WALK = _WALK.replace("{UNNAMED_PRODUCT}", repr(UNNAMED_PRODUCT))


def graph_ctes(seeds: str) -> str:
    """The CTEs ``seeds``, ``walk``, ..., ``graph(id, score)`` (to follow ``WITH RECURSIVE``)."""
    return f"{seeds},\n{_WALK}"


GRAPH_SQL = (
    "WITH RECURSIVE {ctes}\n"
    """SELECT d.id, d.source_id, s.filename, d.page, d.sheet, d.text, d.attributes,
       {similarity} AS similarity,
       g.score / (SELECT max(score) FROM graph) AS score
FROM graph g
JOIN knowledge_documents d ON d.id = g.id
JOIN knowledge_sources s ON s.id = d.source_id AND s.tenant_id = :tenant_id
ORDER BY g.score DESC, d.id
LIMIT :limit
"""
)
"""``graph`` mode: the walk's chunks, best first, score scaled to 0..1 (the best is 1). ``{similarity}``
is :data:`SIMILARITY` for a question (``:model``, ``:qvec``) or ``NULL``."""

QVEC = "(SELECT CAST(:qvec AS vector))"
"""The question vector as an init plan: computed once per execution, also in a generic plan (where a
bare ``CAST(:qvec AS vector)`` would parse the parameter's 1,536 numbers again for every row)."""

SIMILARITY = f"CASE WHEN s.embedding_model = :model THEN 1 - (d.embedding <=> {QVEC}) END"

RELATIONS_SQL = (
    "WITH RECURSIVE {ctes}\n"
    """SELECT s.name AS subject, s.kind AS subject_kind, r.relation, o.name AS object, o.kind AS object_kind,
       ks.filename AS document
FROM edges
JOIN kg_relations r ON r.id = edges.rel_id
JOIN kg_entities s ON s.id = r.subject_id
JOIN kg_entities o ON o.id = r.object_id
JOIN knowledge_documents d ON d.id = r.chunk_id AND d.tenant_id = :tenant_id AND d.is_active
JOIN knowledge_sources ks ON ks.id = r.source_id
ORDER BY s.name, r.relation, o.name
LIMIT :relations_limit
"""
)
"""The relations the walk crossed, with the document each was read from (for the model's tool)."""
