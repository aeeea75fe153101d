"""Chat worker: customer messages (rate limits, media to text, handoff relay, orchestrator calls,
sends), delivery statuses and handoff notices, from the chat queue (docs/architecture.md#services-and-queues).

Run: `python -m services.worker.main` (`switchboard run` does this).
`python -m services.worker.main --check` exits 0 when this worker's heartbeat is fresh in Redis
(container health checks).
"""

import sys

from switchboard.queue import Queue
from switchboard.worker import worker_main


def main(argv: list[str] | None = None) -> int:
    return worker_main(Queue.chat, argv)


if __name__ == "__main__":
    sys.exit(main())
