"""The documentation: a README that fits its budget and links into pages that exist, a site whose nav
lists every page and loads nothing from another host, reference pages generated from the code, and
product documents that speak of the product only (no development history).

Fast on purpose: nothing here builds the site (``make docs`` does, in CI); the generators and the
site check are called directly."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
import typer.main
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
README_MAX_LINES = 220

# Files written for users: the README, the site's pages, the load tests' how-to, the changelog.
PRODUCT_DOCUMENTS = [
    README,
    ROOT / "loadtests" / "README.md",
    ROOT / "CHANGELOG.md",
    *sorted(DOCS.rglob("*.md")),
]
DEVELOPMENT_HISTORY = re.compile(
    r"\bissues? #?\d+\b"  # "issue 17", "issues 17 and 19"
    r"|\bsession \d+\b"  # "Session 10"
    r"|\bbranch `[\w./-]+`"  # "branch `retrieval5`"
    r"|\b20\d\d-\d\d-\d\d \d\d:\d\d\b"  # a dated run
    r"|\b(?:DESIGN|LIBRARIES)\.md\b",  # development notes outside the repository
    re.IGNORECASE,
)


def _load(name: str) -> ModuleType:
    path = DOCS / "gen" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"switchboard_docs_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


reference = _load("reference")
check_site = _load("check_site")


def _slug(heading: str) -> str:
    """The anchor MkDocs (Python-Markdown's toc) gives a heading."""
    text = re.sub(r"[`*_\[\]]", "", heading).strip().lower()
    text = re.sub(r"[^\w\s-]", "", text)
    return re.sub(r"[-\s]+", "-", text).strip("-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*$", text, re.MULTILINE)}


def _nav_files(nav: list) -> list[str]:
    files: list[str] = []
    for entry in nav:
        values = entry.values() if isinstance(entry, dict) else [entry]
        for value in values:
            files += _nav_files(value) if isinstance(value, list) else [value]
    return files


def _mkdocs() -> dict:
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))


# --- README ------------------------------------------------------------------------------------


def test_readme_fits_its_budget_and_keeps_the_two_commands():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines (budget {README_MAX_LINES})"
    assert "make run    # start the whole system on this machine" in lines
    assert "make test   # run the test suite" in lines
    assert "![The console inbox](docs/console-inbox.png)" in lines


def test_readme_links_reach_pages_and_headings_that_exist():
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\(((?:docs/|CHANGELOG|LICENSE)[^)#\s]*)(?:#([^)\s]+))?\)", text)
    assert len(links) >= 15
    for path, anchor in links:
        target = ROOT / path
        assert target.is_file(), f"README links to {path}, which does not exist"
        if anchor:
            assert anchor in _anchors(target), f"README links to {path}#{anchor}: no such heading"


@pytest.mark.parametrize(
    ("task", "page", "anchor"),
    [
        ("connect my WhatsApp number", "docs/channels/whatsapp.md", "connect-a-real-number"),
        ("add my documents", "docs/knowledge-base.md", "add-documents"),
        ("change the model", "docs/agent.md", "change-the-model"),
    ],
)
def test_a_new_users_three_tasks_are_one_link_from_the_readme(task, page, anchor):
    row = next(
        line for line in README.read_text(encoding="utf-8").splitlines() if task.lower() in line.lower()
    )
    assert f"({page}#{anchor})" in row


# --- the site ----------------------------------------------------------------------------------


def test_nav_lists_every_page_and_every_nav_entry_exists():
    config = _mkdocs()
    generated = set(reference.GENERATED_PAGES)
    nav = _nav_files(config["nav"])
    assert len(nav) == len(set(nav)), "a page is listed twice in the nav"
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md") if "gen" not in p.parts}
    assert set(nav) == pages | generated
    assert "security.md" in nav and "going-live.md" in nav


def test_site_is_strict_offline_and_uses_no_web_fonts():
    config = _mkdocs()
    assert config["strict"] is True
    assert config["theme"]["name"] == "material"
    assert config["theme"]["font"] is False  # Google Fonts otherwise
    assert config["plugins"] == ["search"]  # the built-in, local search index
    assert config["validation"]["anchors"] == "warn"  # a warning fails a strict build
    for key in ("extra_javascript", "extra_css"):
        assert not any(re.match(r"^(https?:)?//", str(url)) for url in config.get(key, []))
    assert "repo_url" not in config  # the theme would fetch the repository's facts from GitHub's API


def test_site_check_finds_assets_from_other_hosts_only():
    page = """
        <link rel="stylesheet" href="assets/stylesheets/main.css">
        <link rel="preconnect" href="https://fonts.gstatic.com">
        <script src="//cdn.jsdelivr.net/npm/mermaid.min.js"></script>
        <script src="assets/javascripts/bundle.js"></script>
        <img src="../console-inbox.png">
        <a href="https://example.com/">a link a reader clicks</a>
        <style>@import "https://fonts.googleapis.com/css?family=Roboto"; body { background: url(a.png) }</style>
    """
    assert check_site.external_assets(page) == [
        "https://fonts.gstatic.com",
        "//cdn.jsdelivr.net/npm/mermaid.min.js",
        "https://fonts.googleapis.com/css?family=Roboto",
    ]
    assert check_site.external_assets("src: url(https://fonts.gstatic.com/x.woff2)", css=True) == [
        "https://fonts.gstatic.com/x.woff2"
    ]


def test_site_check_fails_a_built_site_that_loads_a_font_from_another_host(tmp_path):
    (tmp_path / "index.html").write_text('<link href="assets/main.css" rel="stylesheet">')
    assert check_site.main(["check_site", str(tmp_path)]) == 0
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "main.css").write_text(
        "@font-face { src: url(https://fonts.gstatic.com/r.woff2) }"
    )
    assert check_site.main(["check_site", str(tmp_path)]) == 1
    assert check_site.main(["check_site", str(tmp_path / "missing")]) == 2


# --- generated references ----------------------------------------------------------------------


def test_configuration_reference_has_every_setting_with_type_default_and_meaning():
    from switchboard.settings import Settings

    rows = {row.field: row for group in reference.settings_groups() for row in group.rows}
    assert set(rows) == set(Settings.model_fields)
    for name, row in rows.items():
        assert row.description, f"{name} has no description in the configuration reference"
        assert row.type and row.default
    assert rows["orchestrator_url_override"].env == "ORCHESTRATOR_URL"
    assert rows["kb_chunk_size_chars"].default == "`1000`"
    assert rows["encryption_key"].default == "generated"
    page = reference.configuration_markdown()
    assert "| `DATABASE_URL` | str | unset |" in page
    assert not DEVELOPMENT_HISTORY.search(page)


def test_fallback_descriptions_are_only_for_settings_without_their_own():
    docs = reference._field_docstrings(reference.SETTINGS_SOURCE.read_text(encoding="utf-8"))
    own = {field: doc for fields in docs.values() for field, doc in fields.items()}
    for field in reference.UNDOCUMENTED:
        assert not reference.clean_docstring(own.get(field, "")), (
            f"{field} has a docstring now: remove it from UNDOCUMENTED in docs/gen/reference.py"
        )


def test_clean_docstring_drops_development_notes_and_keeps_the_meaning():
    text = """Fuse the graph walk into ``hybrid`` search (off: vector and full-text only, as before issue 19).
    See :class:`~switchboard.settings.Settings` (README "Knowledge base")."""
    assert reference.clean_docstring(text) == (
        "Fuse the graph walk into `hybrid` search (off: vector and full-text only). See `Settings`."
    )


def test_cli_reference_has_every_command_from_the_apps_own_definitions():
    from switchboard.cli import app

    page = reference.cli_markdown()
    command = typer.main.get_command(app)
    assert page.startswith("# CLI reference")
    for name in command.commands:  # type: ignore[attr-defined]
        assert f"## `switchboard {name}`" in page
    assert "### `switchboard channel add-whatsapp`" in page
    assert "--phone-number-id" in page


def test_tenant_settings_reference_has_every_section_and_key():
    from switchboard.tenant_settings import CORE_SECTIONS, channel_sections

    page = reference.tenant_settings_markdown()
    for section, model in {**CORE_SECTIONS, **channel_sections()}.items():
        assert f"## `{section}`" in page
        for name in model.model_fields:
            assert f"| `{name}` |" in page, f"{section}.{name}"
    assert "### `llm.deployments[]`" in page
    assert "| `id` | str | required |" in page
    assert "| `max_tool_iterations` | int | `5` |" in page
    assert not DEVELOPMENT_HISTORY.search(page)


def test_http_api_reference_has_every_route_of_the_orchestrator():
    from switchboard.settings import Settings

    from services.orchestrator.main import create_app

    page = reference.http_api_markdown()
    routes = create_app(Settings(data_dir=Path("/nonexistent/never-created"))).openapi()["paths"]
    for path, item in routes.items():
        for method in set(item) & {"get", "post", "put", "patch", "delete"}:
            assert f"| `{method.upper()}` | `{path}` |" in page
    assert "| `POST` | `/v1/admin/tenants/{slug}/knowledge/documents` | Upload a document" in page
    assert not Path("/nonexistent").exists()


def test_event_types_reference_has_every_event_and_its_fields():
    from switchboard.events import EVENT_TYPES

    page = reference.events_markdown()
    for event_type, model in EVENT_TYPES.items():
        assert f"## `{event_type}`" in page
        for name in model.model_fields:
            assert f"| `{name}` |" in page
    assert "| `agent_id` | UUID (may be null) |" in page
    assert "| `rating` | `up` \\| `down` |" in page


# --- product documents -------------------------------------------------------------------------


@pytest.mark.parametrize("path", PRODUCT_DOCUMENTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_product_documents_carry_no_development_history(path):
    found = DEVELOPMENT_HISTORY.findall(path.read_text(encoding="utf-8"))
    assert not found, f"{path.relative_to(ROOT)}: {found}"


def test_changelog_keeps_an_unreleased_section():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "keepachangelog.com" in text
    assert re.search(r"^## \[Unreleased\]$", text, re.MULTILINE)
