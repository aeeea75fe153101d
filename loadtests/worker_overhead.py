"""The chat worker's own cost per turn: CPU and SQL statements of one plain text message → reply.

Runs ``worker_overhead_probe.py`` on the test suite's fixtures (embedded Postgres and Redis, the real
orchestrator, the offline model answering at once, the Graph sandbox): ``--turns`` text messages from
as many new customers are posted to the WhatsApp service, then the real chat worker answers them one
job at a time (no concurrency, so nothing waits on a lock). Only the worker's thread is measured (the
orchestrator and the sandboxes run in threads of their own).

Printed figures, per turn: the worker thread's CPU (ms), wall time (ms), SQL statements by kind, and
with ``--by-step`` the CPU inside each inbound step (the steps are wrapped, which costs a little).
``--profile FILE`` writes a cProfile of the worker's turns (``python -m pstats FILE``). A new customer
per message: the claim creates the customer and the conversation each time; ``--returning`` measures
each customer's second message instead (what most of a conversation's turns are).

The statements per turn include the few the worker runs once per run (start-up, the queue drained),
spread over ``--turns``: 20 turns read about one more per turn than 60. Needs the development
dependencies (``make install``: pytest and the test suite, whose fixtures it uses).

Run (from the repository root): ``.venv/bin/python loadtests/worker_overhead.py [--turns 60] [--returning] [--by-step]``
(~30 s). For an A/B, run the other checkout's copy with ``PYTHONPATH=OTHER/libs:OTHER`` interleaved.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = ("tests.conftest", "tests.channels.conftest", "tests.channels.whatsapp.conftest")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=60, help="text messages answered (60)")
    parser.add_argument("--by-step", action="store_true", help="CPU inside each inbound step")
    parser.add_argument(
        "--returning",
        action="store_true",
        help="measure each customer's second message (the customer and conversation exist)",
    )
    parser.add_argument("--profile", metavar="FILE", help="write a cProfile of the turns to FILE")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "figures.json"
        env = {**os.environ, "WORKER_TURNS": str(args.turns), "WORKER_OVERHEAD_OUT": str(out)}
        if args.by_step:
            env["WORKER_BY_STEP"] = "1"
        if args.returning:
            env["WORKER_RETURNING"] = "1"
        if args.profile:
            env["WORKER_PROFILE"] = str(Path(args.profile).resolve())
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:randomly",
            "-p",
            "no:cacheprovider",
            *(arg for plugin in PLUGINS for arg in ("-p", plugin)),
            "--rootdir",
            str(ROOT),
            "-c",
            str(ROOT / "pyproject.toml"),
            str(ROOT / "loadtests" / "worker_overhead_probe.py"),
        ]
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
        if done.returncode != 0 or not out.exists():
            sys.stdout.write(done.stdout[-4000:] + done.stderr[-2000:])
            raise SystemExit(f"the probe failed (exit {done.returncode})")
        figures = json.loads(out.read_text())
    load = os.getloadavg()
    who = "returning customers" if figures["returning"] else "new customers"
    print(
        f"chat worker, {figures['turns']} text turns of {who}, one at a time (load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f})"
    )
    print(f"  worker CPU per turn  {figures['worker_cpu_ms_per_turn']:6.1f} ms")
    print(f"  wall per turn        {figures['wall_ms_per_turn']:6.1f} ms")
    statements = figures["statements_per_turn"]
    print(
        f"  SQL per turn         {sum(statements.values()):6.1f} ("
        + ", ".join(f"{kind} {n:.1f}" for kind, n in statements.items())
        + ")"
    )
    if figures["cpu_ms_per_turn_by_step"]:
        print("  CPU per turn by step (ms):")
        for name, ms in figures["cpu_ms_per_turn_by_step"].items():
            print(f"    {ms:6.2f}  {name}")


if __name__ == "__main__":
    main()
