"""Container health check of an HTTP service: ``python -m switchboard.probe http://127.0.0.1:8101/healthz``.

Exits 0 when the URL answers 200 within :data:`TIMEOUT_S`, 1 otherwise (printing why on stderr). Only
the standard library: the probe runs every few seconds in every container and must start fast
(``docker-compose.yml`` and the ECS task definitions in ``infra/terraform`` use it).
"""

from __future__ import annotations

import sys
import urllib.error
import urllib.request

__all__ = ["probe", "main", "TIMEOUT_S"]

TIMEOUT_S = 3.0
"""Seconds one probe waits for the answer (below the health checks' 5 s timeout)."""


def probe(url: str, timeout_s: float = TIMEOUT_S) -> tuple[bool, str]:
    """``(healthy, detail)``: whether ``GET url`` answered 200, and the status or error."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:  # noqa: S310 (our own URL)
            return response.status == 200, f"HTTP {response.status}"
    except urllib.error.HTTPError as exc:
        return False, f"HTTP {exc.code}"
    except (urllib.error.URLError, OSError) as exc:
        return False, f"unreachable: {exc}"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m switchboard.probe URL", file=sys.stderr)
        return 2
    healthy, detail = probe(args[0])
    if not healthy:
        print(f"{args[0]}: {detail}", file=sys.stderr)
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
