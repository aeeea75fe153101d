"""`switchboard run` end to end: everything healthy, `status` agrees, one run per DATA_DIR, and
SIGTERM stops every child and the embedded servers (no orphans)."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.utils.net import free_port

SWITCHBOARD = [sys.executable, "-m", "switchboard.cli"]


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(
        DATA_DIR=str(data_dir),
        LOG_FORMAT="json",
        EMBEDDED_REDIS_PORT=str(free_port()),
        ORCHESTRATOR_PORT=str(free_port()),
        WHATSAPP_PORT=str(free_port()),
        INSTAGRAM_PORT=str(free_port()),
        GMAIL_PORT=str(free_port()),
        MCP_TOOLS_PORT=str(free_port()),
        MODEL_SERVER_PORT=str(free_port()),
        WORKER_METRICS_PORT=str(free_port()),
        WORKER_BACKGROUND_METRICS_PORT=str(free_port()),
        CONSOLE_PORT=str(free_port()),
        WEB_PORT=str(free_port()),
    )
    return env


def _wait_for_state(path: Path, process: subprocess.Popen, timeout_s: float = 90) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stdout.read() if process.stdout else ""
        if path.exists():
            return json.loads(path.read_text())
        time.sleep(0.2)
    raise AssertionError("switchboard run did not write run.json in time")


def test_run_status_single_instance_and_clean_stop(tmp_path):
    data_dir = tmp_path / "data"
    tmp_path.chmod(0o755)
    env = _env(data_dir)
    run = subprocess.Popen(
        [*SWITCHBOARD, "run"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        state = _wait_for_state(data_dir / "run.json", run)
        assert set(state["services"]) >= {
            "orchestrator",
            "whatsapp",
            "instagram",
            "gmail",
            "mcp_tools",
            "worker",
            "worker_background",
        }
        child_pids = [svc["pid"] for svc in state["services"].values()]
        assert all(psutil.pid_exists(pid) for pid in child_pids)
        # The services are forks of the fork server (RUN_FORK_SERVER, on by default), which stops too.
        fork_server_pid = state["fork_server_pid"]
        assert fork_server_pid and all(psutil.Process(pid).ppid() == fork_server_pid for pid in child_pids)

        # run.json is written once every service answered or 60 s passed; on a loaded machine
        # the services may still be importing, so poll `status` (bounded) until all are healthy.
        deadline = time.monotonic() + 120
        while True:
            status = subprocess.run(
                [*SWITCHBOARD, "status"], env=env, capture_output=True, text=True, timeout=60
            )
            if status.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert status.returncode == 0, status.stdout + status.stderr
        lines = status.stdout.strip().splitlines()
        assert len(lines) == len(state["services"])
        assert all(" healthy " in line for line in lines), status.stdout
        # one column for the state, however wide a worker's "(chat queue worker, metrics :PORT)" is
        assert len({line.index(" healthy ") for line in lines}) == 1, status.stdout

        # Another terminal without the port variables still finds the services through run.json.
        plain_env = {k: v for k, v in env.items() if not k.endswith("_PORT")}
        plain_status = subprocess.run(
            [*SWITCHBOARD, "status"], env=plain_env, capture_output=True, text=True, timeout=60
        )
        assert plain_status.returncode == 0, plain_status.stdout + plain_status.stderr
        assert f":{env['WHATSAPP_PORT']}" in plain_status.stdout

        # Every generated secret exists as soon as the system is up (e.g. to sign a test webhook).
        for name in (
            "encryption.key",
            "service.token",
            "mcp.token",
            "admin.token",
            "meta_app.secret",
            "meta_verify.token",
        ):
            assert (data_dir / "secrets" / name).stat().st_size > 0, name

        check_env = env  # no REDIS_URL: --check finds the embedded Redis through run.json, as `status` does
        for worker in ("services.worker.main", "services.worker_background.main"):  # chat, background
            worker_check = subprocess.run(
                [sys.executable, "-m", worker, "--check"], env=check_env, capture_output=True, text=True
            )
            assert worker_check.returncode == 0, worker_check.stdout + worker_check.stderr
            assert worker_check.stdout.startswith("healthy: ")
            # arq's local-time stamp is shown as an age, which reads the same in any time zone
            assert re.match(r"healthy: heartbeat \d+ s ago: j_complete=\d+ ", worker_check.stdout), (
                worker_check.stdout
            )

        second = subprocess.run([*SWITCHBOARD, "run"], env=env, capture_output=True, text=True, timeout=60)
        assert second.returncode == 2
        assert "already running" in second.stderr

        redis_pid = int((data_dir / "redis" / "redis.pid").read_text())
        postmaster_pid = int((data_dir / "postgres" / "postmaster.pid").read_text().splitlines()[0])
        run.send_signal(signal.SIGTERM)
        output, _ = run.communicate(timeout=60)
        assert run.returncode == 0, output
    finally:
        if run.poll() is None:
            run.kill()

    deadline = time.monotonic() + 30
    leftovers = [1]
    while leftovers and time.monotonic() < deadline:
        leftovers = [
            pid
            for pid in [*child_pids, fork_server_pid, redis_pid, postmaster_pid]
            if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        ]
        time.sleep(0.1)
    described = {}
    for pid in leftovers:
        try:
            described[pid] = " ".join(psutil.Process(pid).cmdline())[:200]
        except psutil.NoSuchProcess:
            described[pid] = "(gone)"
    assert leftovers == [], f"still running after stop: {described}\n{output[-3000:]}"
    assert not (data_dir / "run.json").exists()
    assert "seeded demo tenant" in output

    status_after = subprocess.run(
        [*SWITCHBOARD, "status"], env=env, capture_output=True, text=True, timeout=60
    )
    assert status_after.returncode == 1
    assert status_after.stdout.startswith("not running: start it with make run"), status_after.stdout


def test_taken_service_port_is_named_before_anything_starts(tmp_path):
    import socket

    tmp_path.chmod(0o755)
    env = _env(tmp_path / "data")
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", int(env["WHATSAPP_PORT"])))
        squatter.listen()
        result = subprocess.run([*SWITCHBOARD, "run"], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert f"port 127.0.0.1:{env['WHATSAPP_PORT']} is already in use; set WHATSAPP_PORT" in result.stderr
    assert not (tmp_path / "data" / "postgres").exists()  # nothing was started


def test_missing_file_is_one_line_not_a_traceback(tmp_path):
    env = _env(tmp_path / "data")
    result = subprocess.run(
        [
            *SWITCHBOARD,
            "data",
            "import",
            "--tenant",
            "demo",
            "--kind",
            "products",
            str(tmp_path / "nope.csv"),
        ],
        env={**env, "DATABASE_URL": "postgresql://u@127.0.0.1:1/none"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == f"error: no such file: {tmp_path / 'nope.csv'}"
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("extra", "reason"),
    [({"OPENAI_API_KEY": "sk-real"}, "provider key"), ({"HOST": "0.0.0.0"}, "loopback only")],
    ids=["provider-key", "public-host"],
)
def test_model_server_control_is_refused_before_anything_starts(tmp_path, extra, reason):
    tmp_path.chmod(0o755)
    env = {**_env(tmp_path / "data"), "MODEL_SERVER_CONTROL": "true", **extra}
    result = subprocess.run([*SWITCHBOARD, "run"], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "MODEL_SERVER_CONTROL" in result.stderr and reason in result.stderr
    assert not (tmp_path / "data" / "postgres").exists()  # nothing was started
