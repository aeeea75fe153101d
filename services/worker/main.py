"""ARQ worker: rate limits, media to text, handoff relay, orchestrator calls, sends (DESIGN.md step 2).

Run: `python -m services.worker.main` (`switchboard run` does this).
"""

from arq import run_worker
from switchboard.queue import build_worker_settings
from switchboard.settings import load_settings


def main() -> None:
    run_worker(build_worker_settings(load_settings()))


if __name__ == "__main__":
    main()
