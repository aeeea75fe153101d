"""The supervisor's restart budget is for crash loops: a child that ran a while starts a fresh count.

Before, the count was for the run's whole life: five crashes over days (a Redis restart crashes both
workers once, ``loadtests/faults.py``) and ``switchboard run`` stopped everything.
"""

from __future__ import annotations

import io
import os
import threading
import time
from pathlib import Path

import pytest
from switchboard.runtime.services import ServiceSpec
from switchboard.runtime.supervisor import Supervisor
from switchboard.settings import load_settings

CHILD = """
import sys, time
from pathlib import Path
with open(Path(sys.argv[0]).with_name("starts.txt"), "a") as fh:
    fh.write("start\\n")
time.sleep({run_s})
sys.exit(3)
"""


def _supervisor(tmp_path: Path, run_s: float, *, stable_after_s: float, fork_server: bool) -> Supervisor:
    (tmp_path / "flaky_child.py").write_text(CHILD.format(run_s=run_s))
    spec = ServiceSpec("flaky", "worker", "flaky_child")
    return Supervisor(
        settings=load_settings(data_dir=tmp_path),
        services=(spec,),
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        output=io.StringIO(),
        max_restarts=2,
        stable_after_s=stable_after_s,
        restart_backoff_s=0.01,
        fork_server=fork_server,
        preload=("json",),
        preload_later=(),
    )


def _starts(tmp_path: Path) -> int:
    path = tmp_path / "starts.txt"
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.mark.parametrize("fork_server", [False, True], ids=["popen", "forked"])
def test_a_crash_loop_stops_the_run_after_the_budget(tmp_path: Path, fork_server: bool) -> None:
    supervisor = _supervisor(tmp_path, 0.0, stable_after_s=30.0, fork_server=fork_server)
    supervisor.start_all()
    try:
        assert supervisor.monitor() == 1  # gave up
    finally:
        supervisor.stop_all()
    assert _starts(tmp_path) == 3  # the first start and max_restarts restarts


@pytest.mark.parametrize("fork_server", [False, True], ids=["popen", "forked"])
def test_a_child_that_ran_a_while_is_restarted_past_the_budget(tmp_path: Path, fork_server: bool) -> None:
    supervisor = _supervisor(tmp_path, 0.6, stable_after_s=0.3, fork_server=fork_server)
    supervisor.start_all()
    deadline = time.monotonic() + 60

    def stop_after_five_starts() -> None:
        while _starts(tmp_path) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        supervisor.request_stop()

    stopper = threading.Thread(target=stop_after_five_starts)
    stopper.start()
    try:
        code = supervisor.monitor()
    finally:
        stopper.join()
        supervisor.stop_all()
    assert _starts(tmp_path) >= 5  # more crashes than max_restarts, each after a stable run
    assert code == 0  # still supervising when asked to stop
