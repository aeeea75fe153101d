"""Background worker: knowledge ingestion, memory summaries and idle-conversation closing, the inbound
sweeper, Gmail mailbox syncs and event webhook deliveries, from the background queue
(docs/architecture.md#services-and-queues).

Run: `python -m services.worker_background.main` (`switchboard run` does this).
`python -m services.worker_background.main --check` exits 0 when this worker's heartbeat is fresh in
Redis (container health checks).
"""

import sys

from switchboard.queue import Queue
from switchboard.worker import worker_main


def main(argv: list[str] | None = None) -> int:
    return worker_main(Queue.background, argv)


if __name__ == "__main__":
    sys.exit(main())
