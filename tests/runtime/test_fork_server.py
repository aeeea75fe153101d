"""``switchboard run``'s fork server: services forked from one preloaded process are supervised as
before (killed: restarted; stopped: gone), see the environment the supervisor gives them (not the
server's), print through their own prefix, and die with the server."""

from __future__ import annotations

import io
import json
import os
import signal
import threading
import time
from pathlib import Path

import psutil
import pytest
from switchboard.runtime.forkserver import ForkServer, process_name
from switchboard.runtime.services import ServiceSpec
from switchboard.runtime.supervisor import Supervisor
from switchboard.settings import load_settings

CHILD = """
import json, os, sys, time
from pathlib import Path
import preloaded_marker  # imported by the fork server: a fork finds it in sys.modules already
out = Path(sys.argv[0]).with_name("starts.jsonl")
with open(out, "a") as fh:
    fh.write(json.dumps({
        "pid": os.getpid(), "ppid": os.getppid(), "sid": os.getsid(0), "argv": sys.argv[1:],
        "env": os.environ.get("CHILD_ONLY"), "marker_pid": preloaded_marker.PID,
        "name": __name__,
    }) + "\\n")
print("hello from the child", flush=True)
time.sleep(600)
"""

MARKER = "import os\nPID = os.getpid()\n"


class _Output(io.StringIO):
    """A thread-safe enough sink whose text a test can poll."""


def _wait(predicate, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _starts(tmp_path: Path) -> list[dict]:
    path = tmp_path / "starts.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _alive(pid: int) -> bool:
    return psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE


def _supervisor(tmp_path: Path, output: io.StringIO) -> Supervisor:
    (tmp_path / "sleepy_child.py").write_text(CHILD)
    (tmp_path / "preloaded_marker.py").write_text(MARKER)
    spec = ServiceSpec("sleepy", "worker", "sleepy_child")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    return Supervisor(
        settings=load_settings(data_dir=tmp_path),
        services=(spec,),
        env=env,
        output=output,
        restart_backoff_s=0.01,
        fork_server=True,
        preload=("preloaded_marker",),
        preload_later=(),
    )


def test_a_forked_service_is_supervised_like_a_spawned_one(tmp_path: Path) -> None:
    output = _Output()
    supervisor = _supervisor(tmp_path, output)
    supervisor.prepare()
    supervisor.env["CHILD_ONLY"] = "set after the server started"
    supervisor.start_all()
    monitor = threading.Thread(target=supervisor.monitor)
    monitor.start()
    try:
        _wait(lambda: len(_starts(tmp_path)) == 1)
        first = _starts(tmp_path)[0]
        server = supervisor._server
        assert server is not None
        server_pid = server.process.pid
        assert first["ppid"] == server_pid  # a fork of the server, not a new interpreter
        assert first["marker_pid"] == server_pid  # the module was imported once, in the server
        assert first["sid"] == first["pid"]  # its own session, as start_new_session gave
        assert first["env"] == "set after the server started"  # the supervisor's env, not the server's
        assert first["name"] == "__main__"
        # named for `ps -o comm` / `top` / `pgrep` (its command line is still the fork server's)
        assert Path(f"/proc/{first['pid']}/comm").read_text().strip() == "sb-sleepy_child"
        _wait(lambda: "sleepy | hello from the child" in output.getvalue())

        os.kill(first["pid"], signal.SIGKILL)
        _wait(lambda: len(_starts(tmp_path)) == 2)
        second = _starts(tmp_path)[1]
        assert second["pid"] != first["pid"] and second["ppid"] == server_pid
        assert supervisor._children[0].restarts == 1
        _wait(lambda: not _alive(first["pid"]))
    finally:
        supervisor.request_stop()
        monitor.join()
        supervisor.stop_all()
    assert not _alive(second["pid"])  # stopped with SIGTERM through its pid
    assert supervisor._children[0].process.poll() == -signal.SIGTERM
    _wait(lambda: not _alive(server_pid), 10)


def test_the_fork_server_dying_stops_its_services_and_a_new_one_restarts_them(tmp_path: Path) -> None:
    supervisor = _supervisor(tmp_path, _Output())
    supervisor.start_all()
    monitor = threading.Thread(target=supervisor.monitor)
    monitor.start()
    try:
        _wait(lambda: len(_starts(tmp_path)) == 1)
        first = _starts(tmp_path)[0]
        os.kill(first["ppid"], signal.SIGKILL)  # the fork server
        _wait(lambda: not _alive(first["pid"]), 10)  # parent-death signal
        _wait(lambda: len(_starts(tmp_path)) == 2)
        second = _starts(tmp_path)[1]
        assert second["ppid"] != first["ppid"]  # a new server
        assert second["marker_pid"] == second["ppid"]
    finally:
        supervisor.request_stop()
        monitor.join()
        supervisor.stop_all()
    assert not _alive(second["pid"])


def test_exit_codes_are_those_of_a_plain_interpreter(tmp_path: Path) -> None:
    (tmp_path / "exits.py").write_text("import sys\nsys.exit(int(sys.argv[1]))\n")
    (tmp_path / "raises.py").write_text("raise RuntimeError('boom')\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    server = ForkServer(env, preload=("json",))
    try:
        exits = server.spawn(["python", "-m", "exits", "7"], env)
        raises = server.spawn(["python", "-m", "raises"], env)
        assert exits.wait(30) == 7
        assert raises.wait(30) == 1
        assert raises.stdout is not None
        assert b"RuntimeError: boom" in raises.stdout.read()
    finally:
        server.close()
    assert server.process.poll() is not None


def test_the_later_preload_stops_at_the_first_request(tmp_path: Path) -> None:
    """Modules for later are imported while no request waits; the first request ends that list."""
    (tmp_path / "later_a.py").write_text(
        "import time\nfrom pathlib import Path\nPath(__file__).with_name('a.done').touch()\ntime.sleep(1)\n"
    )
    (tmp_path / "later_b.py").write_text(
        "from pathlib import Path\nPath(__file__).with_name('b.done').touch()\n"
    )
    (tmp_path / "which.py").write_text(
        "import sys\nprint(sorted(m for m in sys.modules if m.startswith('later_')))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    server = ForkServer(env, preload=("json",), later=("later_a", "later_b"))
    try:
        server.wait_ready(60)
        _wait(lambda: (tmp_path / "a.done").exists())  # importing later_a (1 s)
        child = server.spawn(["python", "-m", "which"], env)
        assert child.wait(30) == 0
        assert child.stdout is not None
        assert child.stdout.read().strip() == b"['later_a']"  # forked after later_a, before later_b
    finally:
        server.close()
    assert not (tmp_path / "b.done").exists()


@pytest.mark.parametrize(
    ("argv", "name"),
    [
        (["python", "-m", "uvicorn", "services.whatsapp.main:create_app", "--factory"], "sb-whatsapp"),
        (["python", "-m", "services.worker_background.main"], "sb-worker_backgr"[:15]),
        (["python", "-m", "sleepy_child"], "sb-sleepy_child"),
    ],
)
def test_a_forked_service_is_named_after_its_service(argv: list[str], name: str) -> None:
    assert process_name(argv) == name
