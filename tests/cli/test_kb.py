"""``switchboard kb`` commands against the test database (ingestion runs in-process)."""

from __future__ import annotations

import json

from switchboard.db.migrate import upgrade
from switchboard.runtime.embedded import EmbeddedPostgres

from tests.utils.documents import PARTS, RETURNS_POLICY, SHIPPING, make_image_only_pdf, make_pdf, make_xlsx


async def test_kb_add_search_list_deactivate_delete(cli, make_tenant, tmp_path):
    tenant = await make_tenant()
    faq = tmp_path / "faq.pdf"
    faq.write_bytes(make_pdf([RETURNS_POLICY, SHIPPING]))
    parts = tmp_path / "parts.xlsx"
    parts.write_bytes(make_xlsx({"Parts": [["Part", "Name", "Price"], *PARTS]}))
    scan = tmp_path / "scan.pdf"
    scan.write_bytes(make_image_only_pdf())
    copy = tmp_path / "faq-copy.pdf"
    copy.write_bytes(faq.read_bytes())

    added = await cli.arun("kb", "add", str(faq), str(parts), str(scan), str(copy), "--tenant", tenant.slug)
    assert added.exit_code == 1, added.output  # one file failed
    lines = added.output.splitlines()
    assert any(line.startswith("ready") and "faq.pdf" in line and "2 chunks" in line for line in lines)
    assert any(line.startswith("ready") and "parts.xlsx" in line and "3 chunks" in line for line in lines)
    assert any(line.startswith("failed") and "scan.pdf" in line and "image-only" in line for line in lines)
    assert any(line.startswith("skipped") and "same content as faq.pdf" in line for line in lines)
    assert "5 chunks stored from 2 file(s); 2 skipped or failed" in added.output  # one chunk per row
    # Off a terminal no progress bar: click would print its label once, a line with only the file name.
    assert [line.split()[0] for line in added.stdout.splitlines()] == [
        "ready",
        "ready",
        "failed",
        "skipped",
        "5",
    ]

    found = await cli.arun("kb", "search", "How long does standard delivery take?", "--tenant", tenant.slug)
    assert found.exit_code == 0, found.output
    results = [json.loads(line) for line in found.stdout.splitlines()]
    assert results[0]["document"] == "faq.pdf" and results[0]["page"] == 2 and results[0]["score"] > 0
    assert set(results[0]) == {"document", "page", "sheet", "score", "attributes", "text"}

    exact = await cli.arun("kb", "search", "FVAM-2050-C", "--mode", "exact", "--tenant", tenant.slug)
    [hit] = [json.loads(line) for line in exact.stdout.splitlines()]
    assert hit["sheet"] == "Parts" and "FVAM-2050-C" in hit["text"] and "FVAM-2050-B" not in hit["text"]
    assert hit["attributes"] == {
        "row": 3,
        "keys": {"Part": "FVAM-2050-C", "Name": "Steam wand gasket, chrome"},
    }

    nothing = await cli.arun(
        "kb", "search", "Who won the football world cup in 1998?", "--tenant", tenant.slug
    )
    assert nothing.exit_code == 0 and nothing.stdout == ""
    assert nothing.stderr.strip().splitlines()[-1] == "no results (mode hybrid)"

    listed = await cli.arun("kb", "list", "--tenant", tenant.slug)
    header, *rows = listed.stdout.splitlines()
    assert header.split() == ["ID", "STATUS", "ACTIVE", "CHUNKS", "EMBEDDING", "MODEL", "FILENAME"]
    assert [line.split()[-1] for line in rows] == ["faq.pdf", "parts.xlsx"]
    # the columns line up under the header: the filename starts where FILENAME does
    assert all(row[header.index("FILENAME") :].split()[0] in ("faq.pdf", "parts.xlsx") for row in rows)
    assert "scan.pdf" not in listed.output  # a file that cannot be parsed stores nothing

    assert (await cli.arun("kb", "deactivate", "parts.xlsx", "--tenant", tenant.slug)).exit_code == 0
    assert (
        await cli.arun("kb", "search", "FVAM-2050-C", "--mode", "exact", "--tenant", tenant.slug)
    ).stdout == ""
    assert (await cli.arun("kb", "activate", "parts.xlsx", "--tenant", tenant.slug)).exit_code == 0
    assert (
        "FVAM-2050-C"
        in (await cli.arun("kb", "search", "FVAM-2050-C", "--mode", "exact", "--tenant", tenant.slug)).output
    )

    reindexed = await cli.arun("kb", "reindex", "faq.pdf", "--tenant", tenant.slug)
    assert (
        reindexed.exit_code == 0 and reindexed.output.startswith("ready") and "2 chunks" in reindexed.output
    )

    assert (await cli.arun("kb", "delete", "parts.xlsx", "--tenant", tenant.slug)).exit_code == 0
    assert (
        await cli.arun("kb", "search", "FVAM-2050-C", "--mode", "exact", "--tenant", tenant.slug)
    ).stdout == ""
    missing = await cli.arun("kb", "delete", "parts.xlsx", "--tenant", tenant.slug)
    assert missing.exit_code == 2 and "no knowledge document 'parts.xlsx'" in missing.output


async def test_kb_list_of_an_empty_knowledge_base_says_so_on_stderr(cli, make_tenant):
    tenant = await make_tenant()
    listed = await cli.arun("kb", "list", "--tenant", tenant.slug)
    assert listed.exit_code == 0 and listed.stdout == ""
    assert listed.stderr.startswith("no documents (add some with `switchboard kb add")
    assert listed.stdout == ""  # no header over nothing


def test_kb_commands_do_not_announce_the_embedded_postgres_they_attach_to(cli, tmp_path):
    """While `switchboard run` owns the embedded server, a kb command (logging at INFO) attaches to it
    silently, like every other command: "embedded postgres ready" read as a second server starting."""
    tmp_path.chmod(0o755)
    running = EmbeddedPostgres(tmp_path / "postgres")
    upgrade(running.start())
    try:
        env = {"DATABASE_URL": None, "DATA_DIR": str(tmp_path), "LOG_LEVEL": "INFO"}
        created = cli.run("tenant", "create", "--slug", "quiet", "--name", "Quiet", **env)
        assert created.exit_code == 0, created.output
        listed = cli.run("kb", "list", "--tenant", "quiet", **env)
        assert listed.exit_code == 0, listed.output
        assert (
            listed.stderr.strip() == "no documents (add some with `switchboard kb add FILE... --tenant ...`)"
        )
        assert running.is_running()  # attached, not stopped
    finally:
        running.stop()


async def test_kb_add_of_a_missing_file_is_one_line(cli, make_tenant, tmp_path):
    tenant = await make_tenant()
    result = await cli.arun("kb", "add", str(tmp_path / "missing.txt"), "--tenant", tenant.slug)
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: no such file: {tmp_path / 'missing.txt'}"


async def test_kb_search_graph_mode_and_kb_graph(cli, make_tenant, tmp_path):
    from tests.utils.graph_corpus import documents

    tenant = await make_tenant()
    paths = []
    for name, data in documents().items():
        path = tmp_path / name
        path.write_bytes(data)
        paths.append(str(path))
    assert (await cli.arun("kb", "add", *paths, "--tenant", tenant.slug)).exit_code == 0
    question = "Is a PTFE seat compatible with a chlorine-based fluid at 180 °C?"
    found = await cli.arun("kb", "search", question, "--mode", "graph", "--tenant", tenant.slug)
    assert found.exit_code == 0, found.output
    documents_found = {json.loads(line)["document"] for line in found.stdout.splitlines()}
    assert {"chemical-compatibility.csv", "ptfe-properties.txt", "v200-series.txt"} <= documents_found
    empty = await cli.arun(
        "kb", "search", "opening hours on Sunday?", "--mode", "graph", "--tenant", tenant.slug
    )
    assert empty.exit_code == 0 and empty.stdout == "", empty.output
    assert empty.stderr.strip().splitlines()[-1] == "no results (mode graph)"
    bad = await cli.arun("kb", "search", question, "--mode", "nope", "--tenant", tenant.slug)
    assert bad.exit_code != 0 and "unknown --mode 'nope'" in bad.output

    walked = await cli.arun("kb", "graph", "V200", "--hops", "1", "--tenant", tenant.slug)
    assert walked.exit_code == 0, walked.output
    lines = walked.stdout.splitlines()
    assert lines[0] == "entities: V200 (family)"
    assert "V200 made_of PTFE  [v200-series.txt]" in lines
    unknown = await cli.arun("kb", "graph", "Z999", "--tenant", tenant.slug)
    assert unknown.exit_code == 0 and unknown.stdout == "" and "no such entity" in unknown.output
