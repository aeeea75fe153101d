"""``loadtests/import_layers.py`` counts imports against the layers, mutual package pairs and cycles."""

from __future__ import annotations

import subprocess
import sys

import grimp

from tests.utils.scripts import LOADTESTS, loadtest_script

layers = loadtest_script("import_layers")


def _graph(*imports: tuple[str, str]) -> grimp.ImportGraph:
    graph = grimp.ImportGraph()
    for importer, imported in imports:
        graph.add_import(importer=importer, imported=imported)
    return graph


def test_upward_and_sideways_imports_count_against_the_layers() -> None:
    graph = _graph(
        ("switchboard.cli.root", "switchboard.db.models"),  # downward: allowed
        ("switchboard.db.models", "switchboard.cli.root"),  # upward
        ("switchboard.leads.capture", "switchboard.memory.notes"),  # independent siblings
        ("switchboard.inbound.job", "switchboard.outbox.writer"),  # may import each other
        ("switchboard.outbox.writer", "switchboard.inbound.media"),
        ("switchboard.inbound.media", "switchboard.inbound.job"),
    )
    contract = [
        [("cli", False)],
        [("leads", True), ("memory", True)],
        [("inbound", False), ("outbox", False)],
        [("db", False)],
    ]
    counts = layers.counts(graph, contract)
    assert counts.against == [
        "switchboard.db.models -> switchboard.cli.root",
        "switchboard.leads.capture -> switchboard.memory.notes",
    ]
    assert counts.mutual == [("cli", "db"), ("inbound", "outbox")]
    assert counts.cycles == [
        ["switchboard.cli.root", "switchboard.db.models"],
        ["switchboard.inbound.job", "switchboard.inbound.media", "switchboard.outbox.writer"],
    ]
    assert counts.unlayered == []


def test_the_projects_layers_hold_with_the_listed_exceptions() -> None:
    """Every import against the layers in the code is one the contract lists in ``ignore_imports``."""
    import tomllib

    listed = next(
        c["ignore_imports"]
        for c in tomllib.loads((LOADTESTS.parent / "pyproject.toml").read_text())["tool"]["importlinter"][
            "contracts"
        ]
        if c["type"] == "layers"
    )
    found = subprocess.run(
        [sys.executable, str(LOADTESTS / "import_layers.py"), "--ignores"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    assert sorted(line.strip().strip(",").strip('"') for line in found.splitlines()) == sorted(listed)
