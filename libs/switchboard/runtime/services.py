"""The services ``switchboard run`` starts, ``switchboard status`` checks and the compose file names."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Literal

from switchboard.queue.queues import Queue, health_check_key
from switchboard.settings import Settings

__all__ = ["ServiceSpec", "SERVICES", "name_width", "where_width"]


@dataclass(frozen=True)
class ServiceSpec:
    """One process of the system.

    Attributes:
        name: short name used in logs, ``status`` and the compose file (``whatsapp``).
        kind: ``http`` (a FastAPI app factory run by uvicorn) or ``worker`` (a ``main`` module).
        target: ``module:factory`` for HTTP services, the module with ``main()`` for workers.
        port_setting: the ``Settings`` field holding the HTTP port.
        queue: the ARQ queue a worker consumes (its health is that queue's heartbeat key).
        metrics_port_setting: the ``Settings`` field holding a worker's Prometheus port (HTTP services
            answer ``/metrics`` on their own port).
    """

    name: str
    kind: Literal["http", "worker"]
    target: str
    port_setting: str | None = None
    queue: Queue | None = None
    metrics_port_setting: str | None = None

    def port(self, settings: Settings) -> int | None:
        return getattr(settings, self.port_setting) if self.port_setting else None

    def metrics_port(self, settings: Settings) -> int | None:
        """The port ``/metrics`` is served on (``None``: off)."""
        setting = self.metrics_port_setting or self.port_setting
        return (getattr(settings, setting) or None) if setting else None

    def metrics_url(self, settings: Settings) -> str | None:
        port = self.metrics_port(settings)
        return f"{settings.service_url(port)}/metrics" if port else None

    def url(self, settings: Settings) -> str | None:
        port = self.port(settings)
        return f"http://{settings.host}:{port}" if port else None

    def where(self, settings: Settings) -> str:
        """What ``run`` and ``status`` print in the URL column (a worker: its queue and metrics port)."""
        if url := self.url(settings):
            return url
        port = self.metrics_port(settings)
        return f"({self.queue.name if self.queue else 'queue'} queue worker" + (
            f", metrics :{port})" if port else ")"
        )

    @property
    def health_key(self) -> str | None:
        """Redis key a worker refreshes every ``health_check_interval`` seconds (arq naming)."""
        return health_check_key(self.queue) if self.queue else None

    def command(self, settings: Settings) -> list[str]:
        """The argv that starts this service with the current interpreter."""
        if self.kind == "http":
            return [
                sys.executable,
                "-m",
                "uvicorn",
                self.target,
                "--factory",
                "--host",
                settings.host,
                "--port",
                str(self.port(settings)),
                "--log-level",
                "warning",
                "--no-access-log",
            ]
        return [sys.executable, "-m", self.target]


SERVICES: tuple[ServiceSpec, ...] = (
    ServiceSpec("orchestrator", "http", "services.orchestrator.main:create_app", "orchestrator_port"),
    ServiceSpec("whatsapp", "http", "services.whatsapp.main:create_app", "whatsapp_port"),
    ServiceSpec("instagram", "http", "services.instagram.main:create_app", "instagram_port"),
    ServiceSpec("gmail", "http", "services.gmail.main:create_app", "gmail_port"),
    ServiceSpec("web", "http", "services.web.main:create_app", "web_port"),
    ServiceSpec("mcp_tools", "http", "services.mcp_tools.main:create_app", "mcp_tools_port"),
    ServiceSpec(
        "worker",
        "worker",
        "services.worker.main",
        queue=Queue.chat,
        metrics_port_setting="worker_metrics_port",
    ),
    ServiceSpec(
        "worker_background",
        "worker",
        "services.worker_background.main",
        queue=Queue.background,
        metrics_port_setting="worker_background_metrics_port",
    ),
    ServiceSpec("model_server", "http", "services.model_server.main:create_app", "model_server_port"),
    ServiceSpec("console", "http", "services.console.main:create_app", "console_port"),
)


def name_width() -> int:
    """Width of the name column in ``run`` and ``status`` output."""
    return max(13, *(len(spec.name) + 1 for spec in SERVICES))


def where_width(settings: Settings) -> int:
    """Width of the URL column in ``run`` and ``status`` output (a worker's queue text is the widest)."""
    return max(28, *(len(spec.where(settings)) for spec in SERVICES))
