"""Reference pages generated from the code at build time (``make docs``), never copied by hand.

* :func:`configuration_markdown`: every process setting of :class:`switchboard.settings.Settings`,
  grouped by its concern class, with the environment variable, type, default and the field's own
  docstring (read from the source, where the settings module writes one under each field);
* :func:`cli_markdown`: every ``switchboard`` command, from the Typer app's own definitions
  (Typer's ``utils docs`` renderer);
* :func:`tenant_settings_markdown`: every section of a tenant's settings with each key's type,
  default and docstring (the section models of ``switchboard.tenant_settings`` and the sections the
  channels, guardrails and budgets register);
* :func:`http_api_markdown`: every route of the orchestrator's HTTP API (its OpenAPI document) and of
  the public API (``/api/v1``, the console service's);
* :func:`events_markdown`: every event type a tenant's webhook endpoints receive, with the fields of
  its ``data`` (the pydantic models of ``switchboard.events.schemas``).

``hooks.py`` (a MkDocs hook) adds both pages to the site as generated files; nothing is written into
``docs/``.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
import types
import typing
import uuid
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, SecretStr
from pydantic_core import PydanticUndefined

REPO = Path(__file__).resolve().parents[2]
SETTINGS_SOURCE = REPO / "libs" / "switchboard" / "settings.py"
EVENTS_SOURCE = REPO / "libs" / "switchboard" / "events" / "schemas.py"

CONFIGURATION_PAGE = "reference/configuration.md"
CLI_PAGE = "reference/cli.md"
EVENTS_PAGE = "reference/events.md"
TENANT_SETTINGS_PAGE = "reference/tenant-settings.md"
HTTP_API_PAGE = "reference/http-api.md"
GENERATED_PAGES = (CONFIGURATION_PAGE, TENANT_SETTINGS_PAGE, CLI_PAGE, HTTP_API_PAGE, EVENTS_PAGE)


@dataclass(frozen=True)
class SettingRow:
    """One setting: ``env`` the environment variable, ``type`` and ``default`` as shown, ``description``
    the field's docstring (Markdown, one paragraph; empty when the code has none)."""

    field: str
    env: str
    type: str
    default: str
    description: str


@dataclass(frozen=True)
class SettingGroup:
    """One concern class of the settings module: its name, first docstring line and rows."""

    name: str
    summary: str
    rows: tuple[SettingRow, ...]


# Cross-references to development notes that are not part of the product; the reference drops them.
_NOTE_PARENTHESIS = re.compile(
    r"\s*\((?:[^()]|\([^()]*\))*?(?:DESIGN\.md|LIBRARIES\.md|README)(?:[^()]|\([^()]*\))*\)"
)
_CLAUSE_WITH_HISTORY = re.compile(r",?\s*as before issue \d+")
_SENTENCE_WITH_HISTORY = re.compile(r"(?:^|(?<=\.\s))[^.]*\bissue \d+\b[^.]*\.\s*|\s*\bIt was [^.]*\.")
_ROLE = re.compile(r":(class|mod|meth|func|data|attr):`~?([^`]+)`")
# The code cites the site's pages by their path in the repository ("docs/knowledge-base.md#sizing");
# on a generated page (under reference/) that becomes a link the strict build checks.
_DOCS_PAGE = re.compile(r"`{0,2}\bdocs/((?:[\w-]+/)*[\w-]+\.md)(#[\w-]+)?`{0,2}")


def _role_name(match: re.Match[str]) -> str:
    """A reST cross-reference as a code span: a module by its dotted name, anything else by its own name."""
    target = match.group(2)
    return f"``{target if match.group(1) == 'mod' else target.rsplit('.', 1)[-1]}``"


def clean_docstring(text: str) -> str:
    """A field docstring as one Markdown paragraph: reST roles and double backticks become code spans,
    a cited site page (``docs/<page>.md#anchor``) a link, notes pointing at development documents and
    history sentences are dropped."""
    text = " ".join(inspect.cleandoc(text).split())
    text = _ROLE.sub(_role_name, text)
    text = _NOTE_PARENTHESIS.sub("", text)
    text = _CLAUSE_WITH_HISTORY.sub("", text)
    text = _SENTENCE_WITH_HISTORY.sub("", text)
    text = _DOCS_PAGE.sub(r"[\1\2](../\1\2)", text)
    text = text.replace("``", "`")
    return text.strip().replace("|", "\\|")


def _field_docstrings(source: str) -> dict[str, dict[str, str]]:
    """``{class name: {field name: docstring}}`` from attribute docstrings (a string right under a field)."""
    found: dict[str, dict[str, str]] = {}
    for node in ast.parse(source).body:
        if not isinstance(node, ast.ClassDef):
            continue
        fields: dict[str, str] = {}
        body = node.body
        for current, following in zip(body, body[1:] + [None], strict=True):
            if not (isinstance(current, ast.AnnAssign) and isinstance(current.target, ast.Name)):
                continue
            doc = ""
            if (
                isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            ):
                doc = following.value.value
            fields[current.target.id] = doc
        found[node.name] = fields
    return found


def _type_name(annotation: object) -> str:
    """A short, readable name of a field's type (``int``, ``secret``, ``JSON object``); ``None`` in a
    union is left out (an unset field shows ``unset`` as its default)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _type_name(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return " or ".join(_type_name(a) for a in args)  # None: the default column says "unset"
    if origin is typing.Literal:
        return " \\| ".join(f"`{value}`" for value in typing.get_args(annotation))
    if origin is dict:
        return "JSON object"
    if origin is list:
        (item,) = typing.get_args(annotation) or (str,)
        return f"list of {_type_name(item)}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "object"
    if annotation is SecretStr:
        return "secret"
    if annotation is Path:
        return "path"
    if annotation is uuid.UUID:
        return "UUID"
    return getattr(annotation, "__name__", str(annotation))


def _default(name: str, field: object, generated: set[str]) -> str:
    if name in generated:
        return "generated"
    if getattr(field, "default_factory", None) is not None:
        value = field.default_factory()  # type: ignore[attr-defined]
    else:
        value = field.default  # type: ignore[attr-defined]
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, dict):
        return "`{}`" if not value else f"`{value}`"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int):
        return f"`{value:,}`" if value >= 10_000 else f"`{value}`"
    return f"`{value}`"


def _port_description(field: str) -> str:
    service = field.removesuffix("_port")
    return f"Port of the `{service}` service's HTTP server."


# Fields the settings module declares without a docstring of their own (their meaning is in a
# neighbour's); ``tests/test_docs.py`` fails once a field here gains its own docstring.
UNDOCUMENTED = {
    "log_level": "Lowest level written: `DEBUG`, `INFO`, `WARNING` or `ERROR`.",
    "langfuse_public_key": "Langfuse public key; with the secret key set, feedback ratings are exported as scores.",
    "langfuse_secret_key": "Langfuse secret key (see `LANGFUSE_PUBLIC_KEY`).",
    "customer_rate_window_s": "Window of `CUSTOMER_RATE_LIMIT` (seconds, sliding).",
    "tenant_rate_window_s": "Window of `TENANT_RATE_LIMIT` (seconds).",
    "webhook_backoff_max_s": "Cap of the wait between two attempts of one event delivery (seconds).",
    "transcription_model": "Model that turns voice notes into text.",
    "vision_model": "Model that describes images.",
}

# Section titles for the concern classes (a class not listed is titled by its docstring).
GROUP_TITLES = {
    "StateSettings": "State: database, Redis, data folder",
    "NetworkSettings": "Network: ports and service URLs",
    "LogSettings": "Logs",
    "ModelProviderSettings": "Model providers",
    "LangfuseSettings": "Langfuse export",
    "SecretSettings": "Secrets",
    "WhatsAppChannelSettings": "WhatsApp",
    "InstagramChannelSettings": "Instagram",
    "MediaStoreSettings": "Media storage",
    "GmailChannelSettings": "Gmail",
    "InboundSettings": "Inbound messages: rate limits, bursts, retries",
    "DeliverySettings": "Outbound delivery",
    "WebhookSettings": "Event webhooks",
    "MediaSettings": "Media to text",
    "McpClientSettings": "Tools (MCP)",
    "KnowledgeBaseSettings": "Knowledge base",
    "ConsoleSettings": "Console",
    "SmtpSettings": "E-mail (SMTP) for invitations",
}


def settings_groups() -> list[SettingGroup]:
    """Every field of :class:`~switchboard.settings.Settings`, grouped by the concern class that
    declares it, in the order of the settings module."""
    from switchboard import settings as module

    docs = _field_docstrings(SETTINGS_SOURCE.read_text(encoding="utf-8"))
    generated = set(module.GENERATED_SECRETS)
    model_fields = module.Settings.model_fields
    groups: list[SettingGroup] = []
    seen: set[str] = set()
    for class_name, field_docs in docs.items():
        cls = getattr(module, class_name, None)
        if cls is None or cls is module.Settings or not isinstance(cls, type):
            continue
        if not issubclass(module.Settings, cls):
            continue
        rows = []
        for name, doc in field_docs.items():
            if name not in model_fields or name in seen:
                continue
            seen.add(name)
            field = model_fields[name]
            alias = field.validation_alias if isinstance(field.validation_alias, str) else None
            description = clean_docstring(doc) if doc else ""
            if not description and name.endswith("_port"):
                description = _port_description(name)
            description = description or UNDOCUMENTED.get(name, "")
            rows.append(
                SettingRow(
                    field=name,
                    env=alias or name.upper(),
                    type=_type_name(field.annotation),
                    default=_default(name, field, generated),
                    description=description,
                )
            )
        if rows:
            summary = clean_docstring((cls.__doc__ or "").strip().split("\n\n")[0])
            summary = re.sub(r"\s*\(`[\w.]+`\)", "", summary)
            groups.append(SettingGroup(name=class_name, summary=summary, rows=tuple(rows)))
    missing = set(model_fields) - seen
    if missing:
        raise RuntimeError(f"settings not found in {SETTINGS_SOURCE.name}: {sorted(missing)}")
    return groups


def configuration_markdown() -> str:
    """The configuration reference page (Markdown)."""
    lines = [
        "# Configuration reference",
        "",
        "Every process setting, generated from the settings classes of `switchboard.settings`. Each is",
        "read from its environment variable, or from a `.env` file in the folder the command runs from",
        "(normally the repository folder). A malformed value stops the process at start-up with a",
        "message naming the variable. *generated*: when unset, the value is generated once into",
        "`DATA_DIR/secrets/` (only while `GENERATE_SECRETS` is true; containers set it false and must",
        "set every secret).",
        "",
        "What a single business (tenant) may change lives in its tenant settings instead:",
        "[Tenant settings](tenant-settings.md).",
        "",
    ]
    for group in settings_groups():
        title = GROUP_TITLES.get(group.name, group.summary.rstrip("."))
        lines += [
            f"## {title}",
            "",
            group.summary,
            "",
            "| variable | type | default | meaning |",
            "| --- | --- | --- | --- |",
        ]
        lines += [f"| `{r.env}` | {r.type} | {r.default} | {r.description} |" for r in group.rows]
        lines.append("")
    return "\n".join(lines)


def cli_markdown() -> str:
    """The CLI reference page (Markdown), from the Typer app's own command definitions."""
    import typer
    import typer.cli
    import typer.main
    from switchboard.cli import app

    command = typer.main.get_command(app)
    body = typer.cli.get_docs_for_click(
        obj=command, ctx=typer.Context(command), name="switchboard", title="CLI reference"
    )
    intro = (
        "\n\nGenerated from the command line's own definitions: what `switchboard COMMAND --help` prints.\n"
        "Run the commands as `.venv/bin/switchboard ...` from the repository folder (or activate `.venv`).\n"
        "`--tenant` is also `-t`. Errors are one line on stderr with exit status 2.\n"
    )
    title, _, rest = body.strip().partition("\n")
    return f"{title}{intro}{rest}\n"


def events_markdown() -> str:
    """The event types reference page (Markdown), from the event models."""
    from switchboard.events import schemas

    docs = _field_docstrings(EVENTS_SOURCE.read_text(encoding="utf-8"))
    lines = [
        "# Event types",
        "",
        "Every event a tenant's webhook endpoints can subscribe to, generated from the event models",
        "(`switchboard.events.schemas`). Each delivery's body is the envelope",
        '`{"id", "type", "created_at", "tenant_id", "data"}`; `id` is the same on every retry, so',
        "de-duplicate on it. How deliveries are signed and retried: [Event webhooks](../integrations.md).",
        "",
    ]
    for event_type, model in schemas.EVENT_TYPES.items():
        lines += [f"## `{event_type}`", "", clean_docstring(model.__doc__ or ""), ""]
        lines += ["| field | type | meaning |", "| --- | --- | --- |"]
        field_docs = docs.get(model.__name__, {})
        for name, field in model.model_fields.items():
            optional = "" if field.is_required() else " (may be null)"
            type_name = _type_name(field.annotation)
            lines.append(
                f"| `{name}` | {type_name}{optional} | {clean_docstring(field_docs.get(name, ''))} |"
            )
        lines.append("")
    return "\n".join(lines)


_TENANT_SETTINGS_INTRO = """# Tenant settings

For a tenant admin, or a platform admin acting for one: everything a single business may change,
generated from the section models. The settings are one document of sections; every key is optional,
and only what differs from the default is stored, so a default changed later reaches every tenant
that did not choose its own. Process-wide settings are in the [configuration reference](configuration.md).

## Read and change them

```sh
switchboard tenant settings show -t acme                  # in force, defaults filled in (YAML; --format json)
switchboard tenant settings show -t acme --overrides      # only what the tenant stored
switchboard tenant settings set -t acme agent.name=Sam loop.max_tool_iterations=3 locale.language=es
switchboard tenant settings set -t acme 'llm.deployments[main].api_key=-'   # asks for the key without echo
switchboard tenant settings set -t acme agent.system_prompt=null            # back to the default
switchboard tenant settings edit -t acme                  # the whole document in $VISUAL / $EDITOR
switchboard tenant settings history -t acme --details     # who changed what, before and after
```

The console's **Agent settings** page and the admin API (`GET|PUT|PATCH
/v1/admin/tenants/{slug}/settings`, `GET .../settings/schema` for the JSON Schema of every section)
read and write the same document.

- **Validation**: the sections a change touches are validated whole before anything is stored; every
  problem is listed with its path (`loop.max_tool_iterations: Input should be less than or equal to 50`).
  A stored section that no longer validates is logged (`tenant_settings_invalid`) and its defaults are
  used, so the tenant's customers are still answered.
- **Secrets are write-only**: model keys and the embedding key are encrypted on the way in and only
  shown as `set` / `not set`; writing `set` keeps the stored key, `null` removes it.
- **Audit**: every saved change records who (`cli:<user>`, `console:<email>`, `api:...`), when, the
  paths changed, and the sections before and after with secrets redacted.

Texts marked *translated* default to the tenant's `locale.language` unless the tenant writes its own.
Keys are written in plain form where they are secret: a deployment's `api_key` and
`knowledge.embedding_api_key` are accepted on the way in and stored only encrypted (`..._encrypted`).
"""


def _short_default(value: object) -> str:
    if value is PydanticUndefined:
        return "required"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and len(value) > 60:
        return f"`{value[:57].rstrip()}...`"
    if isinstance(value, list) and value and isinstance(value[0], BaseModel):
        return f"{len(value)} rows (see the meaning)"
    if isinstance(value, list):
        return f"`{json.dumps(value)}`" if value else "`[]`"
    if isinstance(value, BaseModel):
        return "see below"
    return "unset" if value is None else f"`{str(value).lower() if isinstance(value, bool) else value}`"


def _model_table(path: str, model: type[BaseModel], lines: list[str]) -> None:
    """Append ``model``'s fields as a table under a ``path`` heading, then its nested models' tables."""
    source = Path(inspect.getsourcefile(model) or "")
    docs = _field_docstrings(source.read_text(encoding="utf-8")).get(model.__name__, {})
    nested: list[tuple[str, type[BaseModel]]] = []
    lines += ["| key | type | default | meaning |", "| --- | --- | --- | --- |"]
    for name, field in model.model_fields.items():
        annotation = field.annotation
        item = (
            (typing.get_args(annotation) or (None,))[0]
            if typing.get_origin(annotation) is list
            else annotation
        )
        if isinstance(item, type) and issubclass(item, BaseModel):
            nested.append((f"{path}.{name}" + ("[]" if item is not annotation else ""), item))
        if field.default_factory is not None:
            default = _short_default(field.default_factory())  # type: ignore[call-arg]
        else:
            default = _short_default(field.default)
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        meaning = clean_docstring(docs.get(name, ""))
        if extra.get("translatable") or extra.get("x-translatable"):
            meaning = f"*translated*. {meaning}".strip()
        lines.append(f"| `{name}` | {_type_name(annotation)} | {default} | {meaning} |")
    lines.append("")
    for nested_path, nested_model in nested:
        lines += [
            f"### `{nested_path}`",
            "",
            clean_docstring((nested_model.__doc__ or "").split("\n\n")[0]),
            "",
        ]
        _model_table(nested_path, nested_model, lines)


def tenant_settings_markdown() -> str:
    """The tenant settings reference page (Markdown), from the registered section models."""
    from switchboard.tenant_settings import CORE_SECTIONS, channel_sections

    lines = [_TENANT_SETTINGS_INTRO]
    for section, model in {**CORE_SECTIONS, **channel_sections()}.items():
        summary = clean_docstring((model.__doc__ or "").strip().split("\n\n")[0])
        summary = re.sub(r":\s*`settings_extensions\[\"\w+\"\]`\.?$", ".", summary)
        lines += [f"## `{section}`", "", summary, ""]
        _model_table(section, model, lines)
    return "\n".join(lines)


def _api_group(path: str) -> str:
    """The section a route belongs to: the segment after ``/v1/admin/tenants/{slug}/`` (``knowledge``),
    ``platform`` for platform routes, else the path's first segments."""
    parts = [p for p in path.split("/") if p]
    if parts[:4] == ["v1", "admin", "tenants", "{slug}"] and len(parts) > 4:
        return parts[4]
    if parts[:3] == ["v1", "admin", "platform"]:
        return "platform"
    if parts[:2] == ["v1", "admin"]:
        return "tenants"
    return parts[1] if len(parts) > 1 and parts[0] == "v1" else parts[0]


def http_api_markdown() -> str:
    """The HTTP API reference page (Markdown), from the orchestrator's OpenAPI document.

    Builds the orchestrator app with settings that point nowhere (``DATA_DIR`` in a temporary folder,
    nothing generated: the OpenAPI document needs no database, secret or network)."""
    import tempfile

    from switchboard.settings import Settings

    from services.orchestrator.main import create_app

    with tempfile.TemporaryDirectory() as data_dir:
        document = create_app(Settings(data_dir=Path(data_dir))).openapi()
    groups: dict[str, list[str]] = {}
    methods = ("get", "post", "put", "patch", "delete")
    for path, item in document["paths"].items():
        for method in methods:
            operation = item.get(method)
            if operation is None:
                continue
            description = clean_docstring((operation.get("description") or "").split("\n\n")[0])
            summary = clean_docstring(operation.get("summary") or "") or description
            row = f"| `{method.upper()}` | `{path}` | {summary} |"
            groups.setdefault(_api_group(path), []).append(row)
    lines = [
        "# HTTP API",
        "",
        "Every route of the orchestrator's HTTP API, generated from its OpenAPI document. Each running",
        "service serves its own interactive document at `/docs` (offline: no asset from a CDN), with the",
        "request and response bodies.",
        "",
        "**Authentication.** `POST /v1/turns` takes the service token (`SERVICE_TOKEN`), which the worker",
        "uses. The admin routes take `Authorization: Bearer` with `ADMIN_TOKEN` (every tenant), a",
        "user's API token (`switchboard users token EMAIL`: that user's role and tenant), or a console",
        "session (then changes need the `X-CSRF-Token` header). `{slug}` is a tenant's slug or id; an",
        "unknown tenant, or one the caller may not see, is a 404.",
        "",
    ]
    for group, rows in groups.items():
        lines += [f"## {group}", "", "| method | path | what it does |", "| --- | --- | --- |", *rows, ""]
    return "\n".join(lines + _public_api_lines())


def _public_api_lines() -> list[str]:
    """The public API's section: every ``/api/v1`` operation of the console service, with its scope."""
    import tempfile

    from switchboard import __version__
    from switchboard.public_api import public_openapi
    from switchboard.settings import Settings

    from services.console.main import create_app

    with tempfile.TemporaryDirectory() as data_dir:
        document = public_openapi(create_app(Settings(data_dir=Path(data_dir))), version=__version__)
    rows = [
        f"| `{method.upper()}` | `{path}` | `{operation['operationId']}` | `{operation.get('x-scope', '-')}` | "
        f"{clean_docstring(operation.get('summary') or '')} |"
        for path, item in document["paths"].items()
        for method, operation in item.items()
    ]
    return [
        "## Public API (`/api/v1`)",
        "",
        "For a business's own systems, served by the console service and published through the proxy:",
        "a tenant API key with the operation's scope (`Authorization: Bearer sbk_...`), cursor",
        "pagination, problem errors. How to use it, with examples: [the API page](../api.md); the",
        "OpenAPI document: `GET /api/v1/openapi.json` (read it at `/api/v1/docs`).",
        "",
        "| method | path | operation | scope | what it does |",
        "| --- | --- | --- | --- | --- |",
        *rows,
        "",
    ]
