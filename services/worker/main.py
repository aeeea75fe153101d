"""ARQ worker: rate limits, media to text, handoff relay, orchestrator calls, sends (DESIGN.md step 2).

Run: `python -m services.worker.main` (`switchboard run` does this).
`python -m services.worker.main --check` exits 0 when a worker's heartbeat is fresh in Redis
(container health checks).
"""

import sys

from arq import run_worker
from switchboard.queue import build_worker_settings, worker_is_healthy
from switchboard.settings import load_settings


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    settings = load_settings()
    if args == ["--check"]:
        healthy, detail = worker_is_healthy(settings)
        print(("healthy: " if healthy else "unhealthy: ") + detail)
        return 0 if healthy else 1
    run_worker(build_worker_settings(settings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
