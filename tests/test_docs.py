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
    r"\bissues? #?\d+\b"  # "issue 17", "issues 17 and 19" (an upstream one: development_history)
    r"|\bsession \d+\b"  # "Session 10"
    r"|\bbranch(?:es)?\s+`{1,2}[\w./-]+`{1,2}"  # "branch `retrieval5`", "branches ``ingest4``"
    r"|\bbranch(?:es)?\s+[a-z][\w-]*\d\b"  # "branch ingest8"
    r"|\b(?:DESIGN|LIBRARIES)\.md\b"  # development notes outside the repository
    r"|\.\./shared/|\bshared/(?:payloads|bench)\b",  # the workplace's folder, not the repository's
    re.IGNORECASE,
)
DATED_RUN = re.compile(
    r"(?<!Date: )\b20\d\d-\d\d-\d\d \d\d:\d\d\b"  # a dated run (not a generated "Create Date:" header)
    r"|\(20\d\d-\d\d-\d\d\b"  # "(2026-12-01, 2-core VM)"
    r"|\b(?:measured|run|audited|taken|on) 20\d\d-\d\d-\d\d\b",
    re.IGNORECASE,
)
_PROJECT_ISSUE = re.compile(r"([\w.-]+)[ \t]+issues? #?\d+\b$", re.IGNORECASE)


def _upstream_projects() -> frozenset[str]:
    """Projects whose issues the code may cite by number ("arq issue #402"): the locked dependencies and
    the few outside projects the product runs on; never this project itself."""
    lock = (ROOT / "uv.lock").read_text(encoding="utf-8")
    own = re.search(r'^name = "([^"]+)"$', (ROOT / "pyproject.toml").read_text(encoding="utf-8"), re.M)
    names = set(re.findall(r'^name = "([^"]+)"$', lock, re.MULTILINE))
    names |= {"cpython", "python", "postgresql", "redis", "github", "chromium"}
    return frozenset(name.lower() for name in names) - {own.group(1).lower() if own else ""}


UPSTREAM_PROJECTS = _upstream_projects()


def development_history(text: str, *, dates: bool = True) -> list[str]:
    """The development history ``text`` carries: this project's issue, session and branch names, notes
    that are not in the repository, dated runs. An upstream project's issue named with its project
    ("arq issue #402", "python-arq/arq#510") is a source, not history."""
    found = []
    for match in DEVELOPMENT_HISTORY.finditer(text):
        line_start = text.rfind("\n", 0, match.start()) + 1
        project = _PROJECT_ISSUE.search(text[line_start : match.end()])
        if project and project.group(1).lower() in UPSTREAM_PROJECTS:
            continue
        found.append(match.group(0))
    return found + (DATED_RUN.findall(text) if dates else [])


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
    assert not development_history(page)


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
    assert not development_history(page)


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
    found = development_history(path.read_text(encoding="utf-8"))
    assert not found, f"{path.relative_to(ROOT)}: {found}"


def test_changelog_keeps_an_unreleased_section():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "keepachangelog.com" in text
    assert re.search(r"^## \[Unreleased\]$", text, re.MULTILINE)


# --- product files -----------------------------------------------------------------------------

# What ships: the code, its services, load scripts, deployment files and this site. Vendored builds
# (static/) are other projects' files; docs/gen/ and this module hold the patterns they look for.
PRODUCT_TREES = ("libs", "services", "loadtests", "infra", "docs")
NOT_OURS = (ROOT / "libs" / "switchboard" / "static", DOCS / "gen")
TEST_FILES_NOT_CHECKED = (ROOT / "tests" / "fixtures", Path(__file__).resolve())
README_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*$", re.MULTILINE)
README_MENTION = re.compile(r"(?P<path>[\w./-]*README\.md)\b|\bREADME\b(?P<after>[^\n]{0,60})")
README_SECTION = re.compile(
    r"""^(?:'s)?[,:]?\s*(?:section\s+)?["'\u201c](?P<section>[^"'\u201d]+)["'\u201d]"""
)
DOCS_PAGE = re.compile(r"\bdocs/((?:[\w-]+/)*[\w-]+\.md)(?:#([\w-]+))?")


def _text_files(*roots: Path, skip: tuple[Path, ...] = ()) -> list[Path]:
    """Every text file under ``roots`` (a file root counts as itself), minus ``skip`` and binaries."""
    found = []
    for root in roots:
        for path in sorted([root] if root.is_file() else root.rglob("*")):
            if not path.is_file() or any(path == s or s in path.parents for s in skip):
                continue
            if "__pycache__" in path.parts or path.suffix in {".png", ".pyc", ".mo"}:
                continue
            try:
                path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
            found.append(path)
    return found


PRODUCT_FILES = _text_files(
    *(ROOT / tree for tree in PRODUCT_TREES),
    README,
    ROOT / "CHANGELOG.md",
    ROOT / "Makefile",
    ROOT / "mkdocs.yml",
    skip=NOT_OURS,
)
TEST_FILES = _text_files(ROOT / "tests", skip=TEST_FILES_NOT_CHECKED)


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def readme_references_that_do_not_exist(path: Path, text: str) -> list[str]:
    """README mentions in ``text`` (of the file ``path``) that lead nowhere: a ``README.md`` path that is
    not a file, a section of the README that has no heading there, or "the README" with no section."""
    headings = {h.strip().lower() for h in README_HEADING.findall(README.read_text(encoding="utf-8"))}
    bad = []
    for match in README_MENTION.finditer(text):
        if match.group("path"):
            name = match.group("path").lstrip("./")
            bases = [ROOT, *[p for p in path.parents if ROOT in p.parents or p == ROOT]]
            if not any((base / name).is_file() for base in bases):
                bad.append(match.group(0))
            continue
        section = README_SECTION.match(match.group("after"))
        if not section or section.group("section").strip().lower() not in headings:
            bad.append(match.group(0).strip())
    return bad


def _page_anchors(page: str) -> set[str] | None:
    """The anchors of a site page (``docs/``-relative path), ``None`` when there is no such page."""
    generated = {
        reference.CONFIGURATION_PAGE: reference.configuration_markdown,
        reference.TENANT_SETTINGS_PAGE: reference.tenant_settings_markdown,
        reference.CLI_PAGE: reference.cli_markdown,
        reference.HTTP_API_PAGE: reference.http_api_markdown,
        reference.EVENTS_PAGE: reference.events_markdown,
    }
    if page in generated:
        text = generated[page]()
    elif (DOCS / page).is_file() and "gen" not in Path(page).parts:
        text = (DOCS / page).read_text(encoding="utf-8")
    else:
        return None
    text = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*$", text, re.MULTILINE)}


def site_pages_that_do_not_exist(text: str) -> list[str]:
    """``docs/<page>.md#anchor`` citations in ``text`` whose page or heading the site does not have."""
    bad = []
    for match in DOCS_PAGE.finditer(text):
        anchors = _page_anchors(match.group(1))
        if anchors is None or (match.group(2) and match.group(2) not in anchors):
            bad.append(match.group(0))
    return bad


def test_the_file_lists_reach_every_product_tree():
    names = {_rel(p) for p in PRODUCT_FILES}
    for expected in (
        "libs/switchboard/settings.py",
        "libs/switchboard/console/templates/_feedback.html",
        "services/worker/main.py",
        "loadtests/kb_search_ab.py",
        "infra/terraform/secrets.tf",
        "infra/Dockerfile",
        "docs/architecture.md",
        "Makefile",
    ):
        assert expected in names
    assert not any(n.startswith(("libs/switchboard/static/", "docs/gen/")) for n in names)
    assert "tests/knowledge/test_ingest.py" in {_rel(p) for p in TEST_FILES}


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("before issue 19, as before", ["issue 19"]),
        ("(``make run`` start-up, issue 17)", ["issue 17"]),
        ("issues 17 and 19", ["issues 17"]),
        ("Session 8's first full run", ["Session 8"]),
        ("the pages (branch ``retrieval5``)", ["branch ``retrieval5``"]),
        ("branches ``ingest4`` and ``ingest6``", ["branches ``ingest4``"]),
        ("(branch ingest8: it was three reads)", ["branch ingest8"]),
        ("Defaults are DESIGN.md's", ["DESIGN.md"]),
        ("(LIBRARIES.md §7)", ["LIBRARIES.md"]),
        ("the shape of ``shared/payloads/whatsapp/text.json``", ["shared/payloads"]),
        ("measured 2026-12-01 on a 2-core VM", ["measured 2026-12-01"]),
        ("(2026-12-01) 27.0 s", ["(2026-12-01"]),
        ("run at 2026-12-02 04:40 UTC", ["2026-12-02 04:40"]),
        # upstream sources and ordinary words
        ("plus 10 s (arq issue #402): a 900 s job", []),
        ("python-arq/arq#510 and LiteLLM issue 1234", []),
        ("at each letter one branch at most can match", []),
        ("Create Date: 2026-11-30 10:24:38.846364", []),
        ("estimated delivery 2026-12-03.", []),
    ],
)
def test_development_history_is_told_apart_from_upstream_sources(text, found):
    assert development_history(text) == found


def test_readme_and_site_references_are_checked():
    here = ROOT / "libs" / "switchboard" / "console" / "app.py"
    assert readme_references_that_do_not_exist(here, '(see README, "Tools (MCP)").') == [
        'README, "Tools (MCP)").'
    ]
    assert readme_references_that_do_not_exist(here, "rotates with `keys rotate` (README)") == ["README)"]
    assert readme_references_that_do_not_exist(here, "(``static/README.md``: origin)") == []
    assert readme_references_that_do_not_exist(here, "``loadtests/README.md`` and ``nowhere/README.md``") == [
        "nowhere/README.md"
    ]
    assert readme_references_that_do_not_exist(here, 'the README "Quick start" section') == []
    assert site_pages_that_do_not_exist("docs/tools.md#business-data, docs/agent.md") == []
    assert site_pages_that_do_not_exist("docs/reference/configuration.md#knowledge-base") == []
    assert site_pages_that_do_not_exist("docs/tools.md#no-such-heading, docs/gone.md") == [
        "docs/tools.md#no-such-heading",
        "docs/gone.md",
    ]


@pytest.mark.parametrize("path", PRODUCT_FILES, ids=_rel)
def test_product_files_carry_no_development_history(path):
    text = path.read_text(encoding="utf-8")
    assert not development_history(text), f"{_rel(path)}: {development_history(text)}"


@pytest.mark.parametrize("path", TEST_FILES, ids=_rel)
def test_tests_carry_no_issue_session_or_branch_history(path):
    text = path.read_text(encoding="utf-8")
    assert not development_history(text, dates=False), (
        f"{_rel(path)}: {development_history(text, dates=False)}"
    )


@pytest.mark.parametrize(
    "path", [p for p in PRODUCT_FILES if p.suffix != ".md" or DOCS not in p.parents], ids=_rel
)
def test_product_files_cite_readme_sections_and_site_pages_that_exist(path):
    """Code, help texts and deployment files point at the README only by a heading it has, and at the
    site by ``docs/<page>.md#anchor`` of a page and heading it has (the site's own pages link each
    other, which the strict build checks)."""
    text = path.read_text(encoding="utf-8")
    assert not readme_references_that_do_not_exist(path, text), _rel(path)
    assert not site_pages_that_do_not_exist(text), f"{_rel(path)}: {site_pages_that_do_not_exist(text)}"


@pytest.mark.parametrize("path", TEST_FILES, ids=_rel)
def test_tests_cite_site_pages_that_exist(path):
    text = path.read_text(encoding="utf-8")
    assert not site_pages_that_do_not_exist(text), f"{_rel(path)}: {site_pages_that_do_not_exist(text)}"
