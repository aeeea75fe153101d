"""``switchboard run``: one process that starts every service as a child and stops them all.

The supervisor holds ``DATA_DIR/run.lock`` for as long as it runs (a second ``switchboard run`` on
the same folder fails with :class:`~switchboard.errors.AlreadyRunning`), writes ``DATA_DIR/run.json``
with the URLs it started (read by ``switchboard status``), prefixes each child's output with its name,
restarts a child that crashes (giving up after ``MAX_RESTARTS`` crashes in a row, each within
``STABLE_AFTER_S`` of its start), and on SIGINT/SIGTERM stops the
children (SIGTERM, then SIGKILL after ``STOP_TIMEOUT_S``), then the embedded servers it started.
Children get ``PR_SET_PDEATHSIG`` so even a SIGKILLed supervisor leaves no service behind.

With ``fork_server`` the children are forks of one :class:`~switchboard.runtime.forkserver.ForkServer`
process that imported the modules they share once (start-up: copy-on-write instead of nine imports);
supervision is the same (a dead fork server is started again with the next restart).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO

import httpx
import redis

from switchboard.errors import AlreadyRunning, SwitchboardError
from switchboard.observability import get_logger
from switchboard.runtime.embedded import set_parent_death_signal
from switchboard.runtime.forkserver import PRELOAD, PRELOAD_LATER, ForkedProcess, ForkServer, ForkServerDied
from switchboard.runtime.services import ServiceSpec
from switchboard.settings import Settings
from switchboard.warming import WARMING

__all__ = ["Supervisor", "RunLock", "PortInUse", "check_ports_free", "check_service_health"]

log = get_logger(__name__)

STOP_TIMEOUT_S = 10.0
HEALTH_TIMEOUT_S = 60.0
MAX_RESTARTS = 5
"""Crashes in a row (each within ``STABLE_AFTER_S`` of its start) after which ``run`` gives up."""
RESTART_BACKOFF_S = 1.0
STABLE_AFTER_S = 60.0
"""A child that ran this long before it exited starts a fresh restart count: the budget is for crash
loops, not for the crashes of a system running for weeks (a Redis restart crashes both workers once)."""


class PortInUse(SwitchboardError):
    """A service's port is taken by another program (often another ``switchboard run``)."""

    def __init__(self, service: str, address: str, setting: str) -> None:
        self.service = service
        self.address = address
        self.setting = setting
        super().__init__(f"{service}: port {address} is already in use; set {setting} to a free port")


def check_ports_free(settings: Settings, services: tuple[ServiceSpec, ...]) -> None:
    """Bind-test every HTTP service's port (and each worker's metrics port) before anything starts.

    Raises:
        PortInUse: the first taken port, naming its setting (e.g. ``WHATSAPP_PORT``).
    """
    for spec in services:
        port = spec.port(settings) or spec.metrics_port(settings)
        if port is None:
            continue
        with socket.socket(socket.AF_INET6 if ":" in settings.host else socket.AF_INET) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((settings.host, port))
            except OSError:
                raise PortInUse(
                    spec.name,
                    f"{settings.host}:{port}",
                    (spec.port_setting or spec.metrics_port_setting or "").upper(),
                ) from None


class RunLock:
    """An exclusive, non-blocking ``flock`` on ``DATA_DIR/run.lock``; released when the process exits.

    The file stays after ``run`` stops, by design: only the ``flock`` on it counts (the kernel drops it
    when the process ends, even on SIGKILL), so a leftover file never blocks the next start. Deleting it
    on exit would let a second ``run`` lock a new file while the first still holds the old one.
    """

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "run.lock"
        self._fh: IO[str] | None = None

    def acquire(self) -> None:
        """Raises: AlreadyRunning: another process holds the lock (its pid is in the message)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(self.path, "a+")  # noqa: SIM115 (held open for the process lifetime)
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            pid_text = fh.read().strip()
            fh.close()
            raise AlreadyRunning(
                str(self.path.parent), int(pid_text) if pid_text.isdigit() else None
            ) from None
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        self._fh = fh

    def release(self) -> None:
        if self._fh is not None:
            fcntl.flock(self._fh, fcntl.LOCK_UN)
            self._fh.close()
            self._fh = None


def check_service_health(
    spec: ServiceSpec,
    settings: Settings,
    redis_url: str | None,
    timeout_s: float = 2.0,
    *,
    http: httpx.Client | None = None,
    redis_client: redis.Redis | None = None,
) -> tuple[bool, str]:
    """Probe one service: ``GET /healthz`` for HTTP services, its queue's ARQ health key for a worker.

    Args:
        http, redis_client: clients to reuse when probing repeatedly (the supervisor's start-up poll).
            Without them each call opens its own: a new ``httpx`` client costs ~50 ms of CPU (it
            builds an SSL context), which at 4 polls a second of 7 services took most of a core
            from the services starting beside it.

    Returns:
        ``(healthy, detail)``; ``detail`` is the health body's summary or the error. A 200 whose body
        names another service (or none) is not healthy: some other program holds the port. A 200
        ``status: "warming"`` is healthy, ``detail`` ends in ``(warming)``.
    """
    if spec.kind == "http":
        try:
            url = f"{spec.url(settings)}/healthz"
            response = (
                http.get(url, timeout=timeout_s) if http is not None else httpx.get(url, timeout=timeout_s)
            )
        except httpx.HTTPError as exc:
            return False, f"unreachable ({type(exc).__name__})"
        try:
            body = response.json()
        except ValueError:
            body = {}
        if response.status_code == 200 and body.get("service") == spec.name:
            # "warming" (the orchestrator loading LiteLLM) is up: its requests wait for the load
            warming = " (warming)" if body.get("status") == WARMING else ""
            return True, f"{body.get('service', '?')} {body.get('version', '?')}{warming}"
        if response.status_code == 200:  # something else on the port (another program, another service)
            return (
                False,
                f"another program answers there ({str(body.get('service') or 'not Switchboard')[:40]})",
            )
        return False, f"HTTP {response.status_code} {body.get('checks', '')}"
    if not redis_url:
        return False, "no REDIS_URL"
    client = redis_client or redis.Redis.from_url(
        redis_url, socket_connect_timeout=timeout_s, socket_timeout=timeout_s
    )
    try:
        value = client.get(spec.health_key or "")
    except redis.RedisError as exc:
        return False, f"redis unreachable ({type(exc).__name__})"
    finally:
        if redis_client is None:
            client.close()
    if value is None:
        return False, "no heartbeat"
    return True, describe_heartbeat(value.decode(errors="replace"))[:120]


def describe_heartbeat(line: str, now: datetime | None = None) -> str:
    """ARQ's health line with its time stamp as an age: ``"heartbeat 3 s ago: j_complete=4 ..."``.

    ARQ writes ``f"{datetime.now():%b-%d %H:%M:%S} j_complete=..."`` (``arq.worker.Worker.record_health``):
    the worker's local time with neither year nor time zone, which a reader elsewhere cannot place. The
    age is computed against the local clock of this machine (the one ``switchboard run`` supervises); a
    line in another shape is returned as it is.

    Args:
        line: the heartbeat key's value.
        now: local naive "now" (tests); default ``datetime.now()``.
    """
    stamp, _, rest = line.partition(" ")
    clock, _, rest = rest.partition(" ")
    now = now or datetime.now()
    try:
        parsed = datetime.strptime(f"{now.year}-{stamp} {clock}", "%Y-%b-%d %H:%M:%S")
    except ValueError:
        return line
    if parsed > now + timedelta(days=1):  # written in December, read in January
        parsed = parsed.replace(year=now.year - 1)
    age_s = max(0.0, (now - parsed).total_seconds())
    return f"heartbeat {age_s:.0f} s ago: {rest}" if rest else f"heartbeat {age_s:.0f} s ago"


@dataclass
class _Child:
    spec: ServiceSpec
    process: subprocess.Popen[bytes] | ForkedProcess | None = None
    restarts: int = 0
    reader: threading.Thread | None = None
    started_at: float = 0.0
    """``time.monotonic()`` of the latest spawn."""


@dataclass
class Supervisor:
    """Starts ``services`` as children with ``env`` and keeps them running until told to stop.

    Args:
        settings: process settings (ports, host, DATA_DIR).
        services: what to start.
        env: environment for the children (already carries DATABASE_URL / REDIS_URL).
        output: where prefixed child output goes (stdout by default).
        max_restarts, stable_after_s, restart_backoff_s: the restart budget (see the constants).
        fork_server: fork the children from a fork server that preloaded ``preload`` (``False``:
            each child is a fresh ``subprocess.Popen``).
    """

    settings: Settings
    services: tuple[ServiceSpec, ...]
    env: dict[str, str]
    output: IO[str] = field(default_factory=lambda: sys.stdout)
    max_restarts: int = MAX_RESTARTS
    stable_after_s: float = STABLE_AFTER_S
    restart_backoff_s: float = RESTART_BACKOFF_S
    fork_server: bool = False
    preload: tuple[str, ...] = PRELOAD
    preload_later: tuple[str, ...] = PRELOAD_LATER
    _server: ForkServer | None = field(default=None, init=False)
    _children: list[_Child] = field(default_factory=list, init=False)
    _stopping: threading.Event = field(default_factory=threading.Event, init=False)
    _print_lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    @property
    def _width(self) -> int:
        return max(len(s.name) for s in self.services)

    def prepare(self) -> None:
        """Start the fork server now (its preload overlaps the database start); no-op without one.

        It gets the supervisor's environment as it is now: each spawn passes the child's own.
        """
        if self.fork_server and (self._server is None or not self._server.alive):
            if self._server is not None:
                log.warning("fork server gone; starting a new one", exit_code=self._server.process.poll())
                self._server.close()
            self._server = ForkServer(
                self.env,
                preload=self.preload,
                later=self.preload_later,
                preexec_fn=set_parent_death_signal,
                output=lambda raw: self._print_line("fork_server", raw),
            )
            log.info("fork server started", pid=self._server.process.pid, modules=len(self.preload))

    def start_all(self) -> None:
        self.prepare()
        if self._server is not None:
            ready = time.monotonic()
            self._server.wait_ready(HEALTH_TIMEOUT_S)
            log.info(
                "fork server ready",
                pid=self._server.process.pid,
                modules=self._server.ready_modules,
                seconds=round(self._server.ready_after_s or 0.0, 2),
                waited_s=round(time.monotonic() - ready, 2),
            )
        for spec in self.services:
            child = _Child(spec)
            self._spawn(child)
            self._children.append(child)

    def _spawn(self, child: _Child) -> None:
        argv = child.spec.command(self.settings)
        if self.fork_server:
            self.prepare()  # again: a fork server that died is started anew
            assert self._server is not None
            try:
                child.process = self._server.spawn(argv, dict(self.env))
            except ForkServerDied as exc:
                # One more try with a new server; a second failure is the caller's (run stops).
                log.warning("fork server failed; starting a new one", service=child.spec.name, error=str(exc))
                self._server.close()
                self._server = None
                self.prepare()
                assert self._server is not None
                child.process = self._server.spawn(argv, dict(self.env))
        else:
            child.process = subprocess.Popen(
                argv,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                preexec_fn=set_parent_death_signal,
                # Own session: a terminal's Ctrl-C reaches only the supervisor, which stops the
                # children in order (services first, then Redis and Postgres).
                start_new_session=True,
            )
        child.started_at = time.monotonic()
        child.reader = threading.Thread(target=self._pump, args=(child.spec.name, child.process), daemon=True)
        child.reader.start()
        log.info("service started", service=child.spec.name, pid=child.process.pid, forked=self.fork_server)

    def _pump(self, name: str, process: subprocess.Popen[bytes] | ForkedProcess) -> None:
        assert process.stdout is not None
        with process.stdout:
            for raw in iter(process.stdout.readline, b""):
                self._print_line(name, raw)

    def _print_line(self, name: str, raw: bytes) -> None:
        line = raw.decode(errors="replace").rstrip("\n")
        with self._print_lock:
            self.output.write(f"{name:<{self._width}} | {line}\n")
            self.output.flush()

    def wait_healthy(
        self, redis_url: str | None, timeout_s: float = HEALTH_TIMEOUT_S
    ) -> dict[str, tuple[bool, str]]:
        """Poll every service until all are healthy or ``timeout_s`` passes; returns the last results.

        Logs ``service healthy`` with the seconds since its spawn as each one first answers, so the
        operator sees which process is slow to start.
        """
        deadline = time.monotonic() + timeout_s
        results: dict[str, tuple[bool, str]] = {}
        first_healthy: set[str] = set()
        redis_client = (
            redis.Redis.from_url(redis_url, socket_connect_timeout=1.0, socket_timeout=1.0)
            if redis_url
            else None
        )
        with httpx.Client() as http, contextlib.ExitStack() as stack:
            if redis_client is not None:
                stack.callback(redis_client.close)
            while time.monotonic() < deadline and not self._stopping.is_set():
                results = {
                    c.spec.name: self._child_health(c, redis_url, http, redis_client) for c in self._children
                }
                for child in self._children:
                    if results[child.spec.name][0] and child.spec.name not in first_healthy:
                        first_healthy.add(child.spec.name)
                        log.info(
                            "service healthy",
                            service=child.spec.name,
                            seconds=round(time.monotonic() - child.started_at, 2),
                        )
                if all(ok for ok, _ in results.values()):
                    break
                time.sleep(0.25)
        return results

    def _child_health(
        self,
        child: _Child,
        redis_url: str | None,
        http: httpx.Client | None = None,
        redis_client: redis.Redis | None = None,
    ) -> tuple[bool, str]:
        """A child that exited is not healthy, whatever answers on its port."""
        assert child.process is not None
        code = child.process.poll()
        if code is not None:
            return False, f"exited with code {code}"
        return check_service_health(
            child.spec, self.settings, redis_url, 1.0, http=http, redis_client=redis_client
        )

    def request_stop(self, *_: object) -> None:
        self._stopping.set()

    def monitor(self) -> int:
        """Block until asked to stop; restart crashed children. Returns the exit status for ``run``."""
        while not self._stopping.wait(0.5):
            for child in self._children:
                assert child.process is not None
                code = child.process.poll()
                if code is None:
                    continue
                if time.monotonic() - child.started_at >= self.stable_after_s:
                    child.restarts = 0  # it had been running fine: not a crash loop
                if child.restarts >= self.max_restarts:
                    log.error(
                        "service keeps crashing; stopping everything", service=child.spec.name, exit_code=code
                    )
                    return 1
                child.restarts += 1
                log.error(
                    "service exited; restarting",
                    service=child.spec.name,
                    exit_code=code,
                    restart=child.restarts,
                )
                time.sleep(self.restart_backoff_s * child.restarts)
                self._spawn(child)
        return 0

    def stop_all(self) -> None:
        """SIGTERM every child, wait up to ``STOP_TIMEOUT_S``, SIGKILL the rest."""
        self._stopping.set()
        for child in self._children:
            if child.process is not None and child.process.poll() is None:
                child.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for child in self._children:
            if child.process is None:
                continue
            try:
                child.process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("service did not stop in time; killing", service=child.spec.name)
                child.process.kill()
                child.process.wait()
            if child.reader is not None:
                child.reader.join(timeout=2)
        if self._server is not None:
            self._server.close()
            self._server = None
        log.info("all services stopped")

    def write_state(self, path: Path, *, database_url: str | None, redis_url: str | None) -> None:
        """Write ``run.json`` (pids and URLs) for ``switchboard status``; URLs of external servers are omitted."""
        state = {
            "pid": os.getpid(),
            "started_at": datetime.now(UTC).isoformat(),
            "fork_server_pid": self._server.process.pid if self._server is not None else None,
            "embedded_database_url": database_url,
            "embedded_redis_url": redis_url,
            # what other commands need to find these services from another terminal
            "network": {
                "host": self.settings.host,
                **{
                    spec.port_setting: spec.port(self.settings) for spec in self.services if spec.port_setting
                },
                **{  # the workers' /metrics ports
                    spec.metrics_port_setting: spec.metrics_port(self.settings)
                    for spec in self.services
                    if spec.metrics_port_setting
                },
            },
            "services": {
                c.spec.name: {"url": c.spec.url(self.settings), "pid": c.process.pid if c.process else None}
                for c in self._children
            },
        }
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2))
        tmp.replace(path)
