"""infra/: the compose file names every service of the registry, and each command it runs exists.

No Docker engine runs here, so the file is checked by reading it.
"""

import importlib
from pathlib import Path

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
            assert port == str(Settings.model_fields[spec.port_setting].default), spec.name  # README's port
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
        if command[0] == "uvicorn":
            module, factory = command[1].split(":")
            assert callable(getattr(importlib.import_module(module), factory)), name
        elif command[:2] == ["python", "-m"]:
            assert callable(importlib.import_module(command[2]).main), name
        elif command[0] == "switchboard":
            assert command[1] in cli_commands | cli_groups, name
        else:
            raise AssertionError(f"{name}: unexpected command {command}")
        health = service.get("healthcheck", {}).get("test", [])
        if health[:3] == ["CMD", "python", "-m"]:
            assert callable(importlib.import_module(health[3]).main)


def test_dockerfile_installs_from_the_lock_file():
    dockerfile = (ROOT / "infra" / "Dockerfile").read_text()
    assert "uv sync --frozen --no-dev" in dockerfile
    assert "--require-hashes" in dockerfile


def test_images_are_under_open_source_licences():
    """Redis 7.4+ is RSALv2/SSPL: the queue runs on Valkey (BSD-3-Clause, same protocol)."""
    images = {name: service.get("image", "") for name, service in _compose()["services"].items()}
    assert images["redis"] == "valkey/valkey:8.1"
    assert images["postgres"] == "pgvector/pgvector:0.8.0-pg17"
    assert not [image for image in images.values() if image.startswith(("redis:", "redis/"))]
    assert _compose()["services"]["redis"]["healthcheck"]["test"] == ["CMD", "valkey-cli", "ping"]


def test_the_image_installs_no_dev_dependencies_and_ships_the_licence():
    dockerfile = (ROOT / "infra" / "Dockerfile").read_text()
    assert dockerfile.count("uv sync --frozen --no-dev") == 2
    assert "COPY pyproject.toml uv.lock README.md LICENSE ./" in dockerfile


def test_the_observability_profile_scrapes_every_service_and_charts_only_defined_metrics():
    import json
    import re

    from prometheus_client.metrics import MetricWrapperBase
    from switchboard.observability import metrics

    compose = _compose()["services"]
    assert {name for name, svc in compose.items() if svc.get("profiles") == ["observability"]} == {
        "prometheus", "grafana", "jaeger",
    }  # fmt: skip
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
