"""A fork server for ``switchboard run``: one process imports what the services share, then forks them.

Each of the nine services used to start as ``python -m ...`` and import its ~600-1,300 modules on its
own; about two thirds of each service's import (SQLAlchemy and our SQLModel tables, pydantic, FastAPI,
Redis/ARQ, structlog/rich, uvicorn) is the same in all of them, so on a 2-core machine the cores spent
most of the start importing the same modules nine times. The fork server (``python -m
switchboard.runtime.forkserver FD``, started by :class:`ForkServer`) imports :data:`PRELOAD` once; each
service is then a ``fork()`` of it (copy-on-write) that runs its ``-m`` module as ``__main__`` with its
own argv, environment and output pipe, exactly as a fresh ``python -m`` would from there on.

Protocol (one ``AF_UNIX``/``SOCK_SEQPACKET`` socket pair, one JSON object per packet):

* supervisor -> server: ``{"argv": [python, "-m", module, *args], "env": {...}}`` with the write end of
  the child's output pipe attached (``SCM_RIGHTS``).
* server -> supervisor: ``{"ready": pid}`` once preloaded; ``{"spawned": pid}`` (or ``{"error": text}``)
  per request, in order; ``{"exited": pid, "code": code}`` when a child ends (``code`` as
  :attr:`subprocess.Popen.returncode`: negative for a signal).

The server exits when the supervisor's end of the socket closes; its children get SIGTERM then
(``PR_SET_PDEATHSIG``), as the server does when the supervisor dies.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import io
import json
import os
import runpy
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from typing import IO, Any

__all__ = ["PRELOAD", "PRELOAD_LATER", "ForkServer", "ForkedProcess", "ForkServerDied"]

PRELOAD: tuple[str, ...] = (
    # Imported at start-up by every service but the model server (measured with `-X importtime`,
    # loadtests/startup_time.sh); none of them starts a thread or opens a connection at import.
    "switchboard.settings",
    "switchboard.observability",
    "switchboard.db.engine",
    "switchboard.db.models",
    "switchboard.db.tenant_scope",
    "switchboard.crypto",
    "switchboard.queue",
    "switchboard.queue.queues",
    "switchboard.health",
    "switchboard.i18n",
    "switchboard.validation",
    "switchboard.warming",
    "switchboard.channels",
    "switchboard.tenant_settings",
    "sqlalchemy.ext.asyncio",
    "asyncpg",
    "redis.asyncio",
    "arq",
    "httpx",
    "jwt",
    # The seven HTTP services run uvicorn (`--loop auto --http auto`: uvloop and httptools).
    "fastapi",
    "uvicorn.main",
    "uvicorn.config",
    "uvicorn.server",
    "uvicorn.lifespan.on",
    "uvicorn.loops.auto",
    "uvicorn.protocols.http.auto",
    "uvicorn.protocols.websockets.auto",
    "prometheus_client",
    "prometheus_client.exposition",
)

PRELOAD_LATER: tuple[str, ...] = (
    # The services themselves (their app factories run in the fork): what is left after PRELOAD is
    # 0.05-1.1 s of CPU per service, much of it shared (our agent, tools and channel modules). The
    # server imports these after it reported ready, one at a time, and stops at the first fork
    # request: a service forked before its module is in is no slower than a fresh import of the
    # rest, and the server does not take a core from the services starting beside it.
    "services.orchestrator.main",
    "services.whatsapp.main",
    "services.instagram.main",
    "services.gmail.main",
    "services.mcp_tools.main",
    "services.model_server.main",
    "services.console.main",
    "services.worker.main",
    "services.worker_background.main",
)

MAX_PACKET = 1 << 20
"""Largest request (argv + environment) in bytes."""


class ForkServerDied(RuntimeError):
    """The fork server exited (or never became ready); its children got SIGTERM."""


# ---------------------------------------------------------------------------------------- server side


def _preload(modules: Sequence[str]) -> list[str]:
    """Import ``modules``; returns the ones that failed (their service reports the error itself)."""
    failed = []
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 (the service that needs it fails loudly on its own import)
            failed.append(name)
    return failed


def process_name(argv: Sequence[str]) -> str:
    """The name a forked service shows in ``ps -o comm``, ``top`` and ``pgrep`` (Linux keeps 15 bytes):
    ``sb-<service>`` from its ``services.<service>.main`` argument, else from the module it runs. A fork
    keeps the server's command line, so without it every service would look like the fork server."""
    service = next((a.split(".")[1] for a in argv if a.startswith("services.") and a.count(".") >= 2), None)
    module = argv[2] if len(argv) > 2 else "service"
    return f"sb-{service or module.rsplit('.', 1)[-1]}"[:15]


def _name_process(argv: Sequence[str]) -> None:
    """``prctl(PR_SET_NAME)`` to :func:`process_name` (best effort: no libc, no name)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(15, process_name(argv).encode())  # 15 == PR_SET_NAME


def _child_main(request: dict[str, Any], out_fd: int, control: socket.socket) -> None:
    """In the forked child: become the process ``request["argv"]`` describes, then ``os._exit``."""
    code = 1
    try:
        control.close()
        os.setsid()  # own session, as `start_new_session=True` gave: a terminal's Ctrl-C is not ours
        from switchboard.runtime.embedded import set_parent_death_signal

        set_parent_death_signal()  # the server's death (it dies with the supervisor) stops us
        _name_process(request["argv"])
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # KeyboardInterrupt, as at start-up
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        os.close(out_fd)
        env: dict[str, str] = request["env"]
        os.environ.clear()
        os.environ.update(env)
        _reopen_stdio(unbuffered=bool(env.get("PYTHONUNBUFFERED")))
        # PYTHONPATH is read at interpreter start: add what this child's environment names.
        extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p not in sys.path]
        sys.path[1:1] = extra
        argv: list[str] = request["argv"]
        if len(argv) < 3 or argv[1] != "-m":
            raise ValueError(f"fork server runs `python -m module ...` only, got {argv[:3]}")
        sys.argv = [argv[2], *argv[3:]]
        gc.unfreeze()
        # the server may have preloaded a service's module (``services.worker.main``): run_module would
        # warn that it "may result in unpredictable behaviour" (it runs the code again as __main__ either
        # way). Only a plain submodule is dropped: a package's (``uvicorn``) submodules hang on it.
        preloaded = sys.modules.get(argv[2])
        if preloaded is not None and "." in argv[2] and not hasattr(preloaded, "__path__"):
            del sys.modules[argv[2]]
        try:
            runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if exc.code is not None and not isinstance(exc.code, int):
                print(exc.code, file=sys.stderr)
        except KeyboardInterrupt:
            code = 130
        except BaseException:  # noqa: BLE001 (print it as the interpreter would, then exit 1)
            traceback.print_exc()
            code = 1
        with contextlib.suppress(Exception):
            import atexit

            atexit._run_exitfuncs()  # what a normal interpreter exit runs (logging, OpenTelemetry)
    except BaseException:  # noqa: BLE001
        with contextlib.suppress(Exception):
            traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _reopen_stdio(*, unbuffered: bool) -> None:
    """New ``sys.stdout``/``stderr`` on fds 1/2 (now the child's pipe), unbuffered as ``-u`` when asked."""
    for name, errors in (("stdout", "strict"), ("stderr", "backslashreplace")):
        fd = 1 if name == "stdout" else 2
        raw = io.FileIO(fd, "w", closefd=False)
        stream = io.TextIOWrapper(
            raw if unbuffered else io.BufferedWriter(raw),
            encoding="utf-8",
            errors=errors,
            write_through=unbuffered,
            line_buffering=not unbuffered and name == "stderr",
        )
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def serve(control_fd: int, preload: Sequence[str] = PRELOAD, later: Sequence[str] = ()) -> None:
    """The server loop (``python -m switchboard.runtime.forkserver FD``); returns when the socket closes.

    Imports ``preload``, reports ready, then imports ``later`` one module at a time until the first
    request arrives.
    """
    control = socket.socket(fileno=control_fd)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the supervisor decides when we stop
    failed = _preload(preload)
    if not _fork_safe(control):
        return
    control.send(json.dumps({"ready": os.getpid(), "modules": len(sys.modules)}).encode())
    for name in later:
        if select.select([control], [], [], 0)[0]:
            break
        failed += _preload([name])
    if failed:
        print(f"fork server: could not preload {', '.join(failed)}", file=sys.stderr, flush=True)
    if not _fork_safe(control):
        return
    children: set[int] = set()
    while True:
        readable, _, _ = select.select([control], [], [], 0.1)
        _reap(control, children)
        if not readable:
            continue
        try:
            data, fds, _flags, _addr = socket.recv_fds(control, MAX_PACKET, 1)
        except OSError:
            data, fds = b"", []
        if not data:  # the supervisor closed its end
            break
        if not fds:
            control.send(json.dumps({"error": "no output pipe attached"}).encode())
            continue
        request = json.loads(data)
        pid = os.fork()
        if pid == 0:
            _child_main(request, fds[0], control)
        os.close(fds[0])
        children.add(pid)
        control.send(json.dumps({"spawned": pid}).encode())
    for pid in children:  # the supervisor is gone: do not leave its services behind
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)


def _fork_safe(control: socket.socket) -> bool:
    """No thread but ours (a fork copies locks held by threads that do not follow); freezes the heap.

    Sends an ``error`` and returns ``False`` otherwise.
    """
    if threading.active_count() != 1:
        names = [t.name for t in threading.enumerate()]
        control.send(json.dumps({"error": f"threads after preload: {names}"}).encode())
        return False
    gc.collect()
    gc.freeze()  # the preloaded objects stay out of the children's collections (fewer copied pages)
    return True


def _reap(control: socket.socket, children: set[int]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        children.discard(pid)
        with contextlib.suppress(OSError):
            control.send(json.dumps({"exited": pid, "code": os.waitstatus_to_exitcode(status)}).encode())


# ------------------------------------------------------------------------------------ supervisor side


class ForkedProcess:
    """A service forked by the fork server: the parts of :class:`subprocess.Popen` the supervisor uses.

    ``returncode`` is set from the server's ``exited`` report (``None`` while it runs); ``stdout`` is
    the read end of its output pipe (bytes).
    """

    def __init__(self, pid: int, stdout: IO[bytes]) -> None:
        self.pid = pid
        self.stdout = stdout
        self.returncode: int | None = None
        self._exited = threading.Event()

    def _set_exited(self, code: int) -> None:
        self.returncode = code
        self._exited.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Raises: subprocess.TimeoutExpired: still running after ``timeout`` seconds."""
        if not self._exited.wait(timeout):
            raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0.0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class ForkServer:
    """The supervisor's handle on one fork server process.

    Args:
        env: the server's environment (each spawn passes the child's own).
        preload: modules the server imports before it is ready.
        later: modules it imports after, until the first spawn request.
        preexec_fn: run in the server process before ``exec`` (the supervisor passes its
            parent-death signal).
        output: called with each line (bytes) the server itself prints (its preload errors).
    """

    def __init__(
        self,
        env: dict[str, str],
        *,
        preload: Sequence[str] = PRELOAD,
        later: Sequence[str] = (),
        preexec_fn: Callable[[], None] | None = None,
        output: Callable[[bytes], None] | None = None,
    ) -> None:
        self._sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "switchboard.runtime.forkserver",
                str(theirs.fileno()),
                ",".join(preload),
                ",".join(later),
            ],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=(theirs.fileno(),),
            preexec_fn=preexec_fn,
            start_new_session=True,  # a terminal's Ctrl-C reaches the supervisor only
        )
        theirs.close()
        self.started_at = time.monotonic()
        self._output = output
        self._replies: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._children: dict[int, ForkedProcess] = {}
        self._pending: dict[int, ForkedProcess] = {}
        self._ready: int | None = None
        self.ready_after_s: float | None = None
        self.ready_modules = 0
        self._dead = False
        self._lock = threading.Lock()  # one request in flight: replies come back in request order
        self._reader = threading.Thread(target=self._read, name="fork-server-reader", daemon=True)
        self._reader.start()
        self._printer = threading.Thread(target=self._print, name="fork-server-output", daemon=True)
        self._printer.start()

    @property
    def alive(self) -> bool:
        return not self._dead and self.process.poll() is None

    def _print(self) -> None:
        assert self.process.stdout is not None
        for line in iter(self.process.stdout.readline, b""):
            if self._output is not None:
                self._output(line)

    def _read(self) -> None:
        while True:
            try:
                data = self._sock.recv(MAX_PACKET)
            except OSError:
                data = b""
            if not data:
                break
            message = json.loads(data)
            if "exited" in message:
                with self._cond:
                    child = self._children.pop(message["exited"], None)
                if child is not None:
                    child._set_exited(message["code"])
                continue
            with self._cond:
                if "ready" in message:
                    self._ready = message["ready"]
                    self.ready_after_s = time.monotonic() - self.started_at
                    self.ready_modules = message.get("modules", 0)
                else:
                    self._replies.append(message)
                self._cond.notify_all()
        # The server is gone: its children got SIGTERM from their parent-death signal.
        with self._cond:
            self._dead = True
            orphans = list(self._children.values())
            self._children.clear()
            self._cond.notify_all()
        for child in orphans:
            _wait_gone(child.pid, 5.0)
            child._set_exited(-signal.SIGTERM)

    def wait_ready(self, timeout_s: float) -> int:
        """Block until the server preloaded; returns its pid.

        Raises:
            ForkServerDied: it exited, refused (threads after preload) or was not ready in time.
        """
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._ready is None:
                if self._dead or self._replies:
                    detail = self._replies[0].get("error") if self._replies else "exited"
                    raise ForkServerDied(f"fork server not ready: {detail}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ForkServerDied(f"fork server not ready after {timeout_s} s")
                self._cond.wait(left)
            return self._ready

    def spawn(self, argv: list[str], env: dict[str, str], timeout_s: float = 120.0) -> ForkedProcess:
        """Fork ``argv`` (``[python, "-m", module, *args]``) with ``env``; returns once it has a pid.

        Raises:
            ForkServerDied: the server is gone or did not answer within ``timeout_s`` (it waits for
                the preload first).
        """
        self.wait_ready(timeout_s)
        read_fd, write_fd = os.pipe()
        with self._lock:
            try:
                socket.send_fds(self._sock, [json.dumps({"argv": argv, "env": env}).encode()], [write_fd])
            except OSError as exc:
                os.close(read_fd)
                raise ForkServerDied(f"fork server unreachable: {exc}") from exc
            finally:
                os.close(write_fd)
            deadline = time.monotonic() + timeout_s
            with self._cond:
                while not self._replies:
                    if self._dead or time.monotonic() > deadline:
                        os.close(read_fd)
                        raise ForkServerDied("fork server exited before it forked")
                    self._cond.wait(0.5)
                reply = self._replies.pop(0)
                if "error" in reply:
                    os.close(read_fd)
                    raise ForkServerDied(f"fork server refused: {reply['error']}")
                child = ForkedProcess(reply["spawned"], os.fdopen(read_fd, "rb"))
                self._children[child.pid] = child
        return child

    def close(self, timeout_s: float = 5.0) -> None:
        """Close the socket (the server exits, SIGTERMing any child left) and wait for it."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._reader.join(timeout=timeout_s)
        self._printer.join(timeout=2)


def _wait_gone(pid: int, timeout_s: float) -> None:
    """Wait until ``pid`` no longer exists (it is not our child: no ``waitpid``)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        except PermissionError:
            return
        time.sleep(0.05)


if __name__ == "__main__":
    serve(
        int(sys.argv[1]), [m for m in sys.argv[2].split(",") if m], [m for m in sys.argv[3].split(",") if m]
    )
