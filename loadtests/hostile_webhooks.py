"""Hostile webhook bodies, a long random run, for every registered channel (loopback only).

Runs ``tests/channels/test_hostile_input.py`` (the real channel service, worker and orchestrator on the
test session's embedded PostgreSQL and Redis; the provider sandbox and the offline model stand in for
what is outside) with the ``load`` hypothesis profile: ``--examples`` random cases per test instead of
CI's 25 fixed ones, from a random seed (printed, so a failure can be replayed with ``--seed``). Each
case is posted signed (with junk added to the body, or with values replaced by junk) and, for the
additive cases, again unsigned. Prints per test and channel: requests tried, 5xx answers, signed
requests not answered 2xx, valid messages not stored, unsigned messages stored, rows stored, rows
stored as unprocessable (with their reason), dead letters, worker jobs that raised, replies sent.

Usage: ``.venv/bin/python loadtests/hostile_webhooks.py [--examples 300] [--seed N]``
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COLUMNS = (
    "requests",
    "http_5xx",
    "signed_non_2xx",
    "valid_messages",
    "valid_not_stored",
    "unsigned_stored",
    "rows",
    "unprocessable",
    "dead_letters",
    "failed_jobs",
    "replies",
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=300, help="cases per test (CI runs 25)")
    parser.add_argument("--seed", type=int, default=None, help="replay a run (default: a random seed)")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    with tempfile.TemporaryDirectory(prefix="sb-hostile-") as tmp:
        figures = Path(tmp) / "figures.jsonl"
        env = dict(
            os.environ,
            HYPOTHESIS_PROFILE="load",
            HOSTILE_EXAMPLES=str(args.examples),
            HOSTILE_SEED=str(seed),
            HOSTILE_FIGURES=str(figures),
        )
        print(f"hostile webhooks: {args.examples} cases per test, seed {seed}, {os.cpu_count()} CPUs")
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "tests/channels/test_hostile_input.py",
                "-q",
                "-p",
                "no:randomly",
                "-W",
                "ignore",
                "-k",
                "not issue_13",
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        rows = [json.loads(line) for line in figures.read_text().splitlines()] if figures.exists() else []
    print(f"{'test':<22}" + "".join(f"{c:>{len(c) + 2}}" for c in COLUMNS))
    for row in rows:
        print(f"{row['test']:<22}" + "".join(f"{row.get(c, '-')!s:>{len(c) + 2}}" for c in COLUMNS))
    if rows:
        print(
            f"{'total':<22}"
            + "".join(f"{sum(int(r.get(c, 0)) for r in rows):>{len(c) + 2}}" for c in COLUMNS)
        )
    tail = (result.stdout.strip().splitlines() or ["(no pytest output)"])[-1]
    print(f"pytest: {tail}")
    if result.returncode != 0:
        print(result.stdout[-4000:], file=sys.stderr)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
