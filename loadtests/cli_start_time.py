"""Start time of ``switchboard`` commands against ``python -c pass`` as the floor, idle and loaded.

A command loads only the modules it uses (:func:`switchboard.cli.root.load_commands`), so its start
time is the interpreter's plus what that command imports. This prints, for each command, the median
and the slowest of ``--runs`` wall-clock runs, first on an idle machine, then with one busy-looping
process per core ("loaded"), each next to the floor measured in the same conditions.

The commands run against no running system (``status`` then reports it is not running: the start and
the check, not a running system's answers, are what is measured); ``simulate`` and ``kb`` are timed
with ``--help``, which imports their command modules without needing a tenant.

Usage::

    .venv/bin/python loadtests/cli_start_time.py            # idle and loaded, 5 runs each
    .venv/bin/python loadtests/cli_start_time.py --runs 9 --no-load
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLI = ROOT / ".venv" / "bin" / "switchboard"

COMMANDS: list[tuple[str, list[str]]] = [
    ("python -c pass (floor)", [sys.executable, "-c", "pass"]),
    ("switchboard version", [str(CLI), "version"]),
    ("switchboard status", [str(CLI), "status"]),
    ("switchboard simulate turn --help", [str(CLI), "simulate", "turn", "--help"]),
    ("switchboard kb --help", [str(CLI), "kb", "--help"]),
]


def _burn(stop_at: float) -> None:
    """Busy-loop until ``stop_at`` (``time.monotonic()`` seconds): one core's worth of load."""
    while time.monotonic() < stop_at:
        pass


def time_command(argv: list[str], runs: int, env: dict[str, str]) -> list[float]:
    """Wall-clock seconds of ``runs`` runs of ``argv`` (output discarded; the exit status is not
    checked: ``status`` exits 1 when no system runs)."""
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
        samples.append(time.perf_counter() - start)
    return samples


def measure(runs: int, env: dict[str, str]) -> list[tuple[str, float, float]]:
    """``(label, median s, slowest s)`` per command."""
    rows = []
    for label, argv in COMMANDS:
        samples = time_command(argv, runs, env)
        rows.append((label, statistics.median(samples), max(samples)))
    return rows


def show(title: str, rows: list[tuple[str, float, float]]) -> None:
    floor = rows[0][1]
    print(f"\n{title}")
    print(f"  {'command':<36} {'median s':>9} {'slowest s':>10} {'over floor s':>13}")
    for label, median, slowest in rows:
        print(f"  {label:<36} {median:>9.2f} {slowest:>10.2f} {median - floor:>13.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per command (default 5)")
    parser.add_argument("--no-load", action="store_true", help="idle measurement only")
    args = parser.parse_args()
    if not CLI.exists():
        print(f"{CLI} not found: run `make install` first", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as data_dir:
        # An empty data directory: no run.json, so `status` finds no running system and says so.
        env = {**os.environ, "DATA_DIR": data_dir}
        print(f"{os.cpu_count()} cores, {args.runs} runs per command")
        show("idle", measure(args.runs, env))
        if not args.no_load:
            cores = os.cpu_count() or 1
            stop_at = time.monotonic() + 3600
            burners = [
                multiprocessing.Process(target=_burn, args=(stop_at,), daemon=True) for _ in range(cores)
            ]
            for proc in burners:
                proc.start()
            try:
                show(f"loaded ({cores} busy processes)", measure(args.runs, env))
            finally:
                for proc in burners:
                    proc.terminate()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
