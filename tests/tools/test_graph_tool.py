"""``explore_knowledge_graph`` through the real MCP server over Streamable HTTP.

The model names entities; the server walks the tenant's graph for the tenant the orchestrator
injected, whatever tenant id the model's arguments carry.
"""

from __future__ import annotations

from switchboard.knowledge import ingest_source, register_upload

from tests.tools.test_mcp_http import source, turn
from tests.utils.graph_corpus import documents


async def _ingest_corpus(sessions, settings, tenant_id) -> None:  # type: ignore[no-untyped-def]
    for name, data in documents().items():
        async with sessions() as session, session.begin():
            outcome = await register_upload(session, settings, tenant_id=tenant_id, filename=name, data=data)
        report = await ingest_source(
            sessions,
            settings,
            tenant_id=tenant_id,
            source_id=outcome.source.id,
            content_hash=outcome.source.content_hash,
        )
        assert report.status == "ready", report.error


async def test_the_model_names_entities_and_gets_relations_and_passages_of_its_tenant(
    mcp_server, settings, sessions, make_shop
):
    url, _ = mcp_server
    valves, other = await make_shop(), await make_shop()
    await _ingest_corpus(sessions, settings, valves.tenant_id)
    tools = source(url, settings, sessions)
    definition = next(
        d for d in await tools.definitions(turn(valves)) if d["function"]["name"] == "explore_knowledge_graph"
    )
    assert set(definition["function"]["parameters"]["properties"]) == {"entities", "hops"}

    output = await tools.call(
        "explore_knowledge_graph", {"entities": ["V200", "chlorine"], "hops": 2}, turn(valves)
    )
    result = output.content
    assert sorted(e["name"] for e in result["entities"]) == ["V200", "chlorine"]
    relations = {(r["subject"], r["relation"], r["object"], r["document"]) for r in result["relations"]}
    assert ("V200", "made_of", "PTFE", "v200-series.txt") in relations
    assert ("PTFE", "compatible_with", "chlorine", "chemical-compatibility.csv") in relations
    documents_seen = {p["document"] for p in result["passages"]}
    assert {"v200-series.txt", "chemical-compatibility.csv"} <= documents_seen

    # a model passing another tenant's id reads the injected tenant's graph (empty here)
    stolen = await tools.call(
        "explore_knowledge_graph",
        {"entities": ["V200"], "hops": 2, "tenant_id": str(valves.tenant_id)},
        turn(other),
    )
    assert stolen.content == {"entities": [], "relations": [], "passages": []}
