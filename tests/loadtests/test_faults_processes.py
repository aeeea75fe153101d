"""The faults script finds the service it kills or freezes (``loadtests/faults.py`` ``service_pid``): a
service forked by the fork server is a grandchild of ``switchboard run`` named ``sb-<service>`` with the
server's command line; one spawned directly names its module. A check that looked only at direct
children with the module in their command line would find neither."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.utils.scripts import loadtest_script

faults = loadtest_script("faults")

# root → fork server stand-in → "sb-worker" (renamed like the fork server's children, same command line);
# root → a directly spawned orchestrator (its module in its command line); one line of pids on stdout
TREE = textwrap.dedent(
    """
    import ctypes, os, subprocess, sys, time
    read, write = os.pipe()
    if os.fork() == 0:  # the fork server
        if os.fork() == 0:  # its service
            ctypes.CDLL("libc.so.6").prctl(15, b"sb-worker")
            os.write(write, f"{os.getpid()}\\n".encode())
            time.sleep(60)
            os._exit(0)
        time.sleep(60)
        os._exit(0)
    worker = os.read(read, 64).decode().strip()
    direct = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                               "services.orchestrator.main:create_app"])
    print(worker, direct.pid, flush=True)
    time.sleep(60)
    """
)


def test_a_forked_grandchild_and_a_direct_child_are_both_found_and_a_missing_service_is_an_error() -> None:
    root = subprocess.Popen([sys.executable, "-c", TREE], stdout=subprocess.PIPE, text=True)
    try:
        assert root.stdout is not None
        worker, orchestrator = (int(pid) for pid in root.stdout.readline().split())
        assert faults.service_pid(root.pid, "worker") == worker
        assert faults.service_pid(root.pid, "orchestrator") == orchestrator
        with pytest.raises(RuntimeError, match="no live mcp_tools process"):
            faults.service_pid(root.pid, "mcp_tools")
    finally:
        for pid in faults._descendants(root.pid):
            subprocess.run(["kill", "-9", str(pid)], check=False)
        root.kill()
        root.wait()
