"""Prometheus metrics of every service (prometheus-client, the process's default registry).

HTTP services answer ``GET /metrics`` (:func:`mount_metrics`, added by the shared service app, the
MCP tool server and the model server); the two workers serve the same text on their own port
(:func:`start_metrics_server`, ``WORKER_METRICS_PORT`` / ``WORKER_BACKGROUND_METRICS_PORT``). One
process per service, so no multiprocess mode. Names follow Prometheus conventions: ``_total`` for
counters, base units (seconds, USD) in the name. Label values are bounded sets (channel, outcome,
queue) plus ``tenant`` (a tenant id) on the token and cost counters. Labels a tenant names (model,
deployment id, tool name) pass :class:`LabelValues`: bounded in length and in number per process,
so no tenant setting can grow ``/metrics`` without end.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, Counter, Gauge, Histogram, generate_latest

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from fastapi import FastAPI

__all__ = [
    "LABEL_VALUE_MAX_CHARS",
    "LabelValues",
    "MODEL_LABELS",
    "DEPLOYMENT_LABELS",
    "TOOL_LABELS",
    "OTHER_LABEL",
    "WEBHOOK_ACKS",
    "WEBHOOK_ACK_SECONDS",
    "QUEUE_DEPTH",
    "JOBS",
    "JOB_WAIT_SECONDS",
    "JOB_SECONDS",
    "DEAD_LETTERS",
    "HOLDING_REPLIES",
    "TURNS",
    "TURN_SECONDS",
    "MODEL_CALLS",
    "MODEL_CALL_SECONDS",
    "MODEL_FALLBACKS",
    "MODEL_TOKENS",
    "MODEL_COST_USD",
    "TOOL_CALLS",
    "TOOL_CALL_SECONDS",
    "SENDS",
    "HANDOFFS",
    "HANDOFF_WAIT_SECONDS",
    "GUARDRAIL_DECISIONS",
    "FEEDBACK",
    "EVENT_DELIVERIES",
    "EVENTS_PRUNED",
    "LEADS_CREATED",
    "mount_metrics",
    "start_metrics_server",
]

_FAST_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
"""Webhook acknowledgements: Meta wants an answer within seconds; ours should take milliseconds."""
_SLOW_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
"""Jobs, turns, model and tool calls: up to the 120 s turn budget and the 300 s memory job."""
_WAIT_BUCKETS_S = (1.0, 10.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 14400.0, 86400.0)
"""Time a customer waits for a person: seconds to a day."""

OTHER_LABEL = "other"
"""The label value of a tenant-named thing past :class:`LabelValues`' bounds."""
LABEL_VALUE_MAX_CHARS = 200
"""Longest tenant-named label value (a model name's limit at save: ``MODEL_NAME_MAX_CHARS``)."""


class LabelValues:
    """The values one tenant-named label (model, deployment, tool) may take in this process.

    The first ``max_values`` distinct values are used as they are; any later one, and any value
    longer than :data:`LABEL_VALUE_MAX_CHARS` or holding characters outside printable ASCII, is
    counted as :data:`OTHER_LABEL`. So ``/metrics`` stays bounded whatever tenants save (a new name
    per save, a test of a deployment under a throwaway name), while the names in normal use keep
    their own series.
    """

    def __init__(self, max_values: int) -> None:
        self.max_values = max_values
        self._known: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, value: str) -> str:
        """``value`` itself while it fits the bounds, else :data:`OTHER_LABEL`."""
        if value in self._known:
            return value
        if len(value) > LABEL_VALUE_MAX_CHARS or not value.isascii() or not value.isprintable():
            return OTHER_LABEL
        with self._lock:
            if len(self._known) >= self.max_values:
                return OTHER_LABEL
            self._known.add(value)
        return value


MODEL_LABELS = LabelValues(500)
"""``model`` label of the token and cost counters (distinct model names per process)."""
DEPLOYMENT_LABELS = LabelValues(500)
"""``deployment`` label of the model call counters (deployment ids and group names per process)."""
TOOL_LABELS = LabelValues(500)
"""``tool`` label of the tool call counters (imported tools are named by tenants)."""

WEBHOOK_ACKS = Counter(
    "switchboard_webhook_acks_total",
    "Webhook deliveries answered, by channel and outcome (accepted, bad_signature, unavailable...).",
    ["channel", "outcome"],
)
WEBHOOK_ACK_SECONDS = Histogram(
    "switchboard_webhook_ack_seconds",
    "Time from a webhook request's start to its answer, seconds.",
    ["channel"],
    buckets=_FAST_BUCKETS_S,
)
QUEUE_DEPTH = Gauge(
    "switchboard_queue_depth",
    "Jobs waiting in an ARQ queue (queued or deferred), sampled by its worker.",
    ["queue"],
)
JOBS = Counter(
    "switchboard_jobs_total",
    "ARQ jobs run, by queue, job and outcome (ok, retry, error).",
    ["queue", "job", "outcome"],
)
JOB_WAIT_SECONDS = Histogram(
    "switchboard_job_wait_seconds",
    "Time from a job's enqueue to the start of this run, seconds (deferrals included).",
    ["queue", "job"],
    buckets=_SLOW_BUCKETS_S,
)
JOB_SECONDS = Histogram(
    "switchboard_job_seconds", "Run time of one job try, seconds.", ["queue", "job"], buckets=_SLOW_BUCKETS_S
)
DEAD_LETTERS = Counter(
    "switchboard_dead_letters_total",
    "Messages given up on: inbound rows dead-lettered and outbox parts that reached dead_letter.",
    ["kind"],
)
TURNS = Counter(
    "switchboard_turns_total", "Agent turns, by outcome (replied, silent, degraded, skipped...).", ["outcome"]
)
HOLDING_REPLIES = Counter(
    "switchboard_holding_replies_total",
    "Holding messages sent because an answer was not ready by the tenant's first-reply deadline.",
)
TURN_SECONDS = Histogram(
    "switchboard_turn_seconds", "Duration of one agent turn, seconds.", buckets=_SLOW_BUCKETS_S
)
MODEL_CALLS = Counter(
    "switchboard_model_calls_total",
    "Model calls (one per gateway call), by the deployment that answered (or the group tried) and outcome.",
    ["deployment", "outcome"],
)
MODEL_CALL_SECONDS = Histogram(
    "switchboard_model_call_seconds",
    "Duration of one gateway call, seconds.",
    ["deployment"],
    buckets=_SLOW_BUCKETS_S,
)
MODEL_FALLBACKS = Counter(
    "switchboard_model_fallbacks_total",
    "Gateway calls answered by a later group than the first.",
    ["deployment"],
)
MODEL_TOKENS = Counter(
    "switchboard_model_tokens_total",
    "Tokens used, by tenant, model and kind (prompt, completion).",
    ["tenant", "model", "kind"],
)
MODEL_COST_USD = Counter(
    "switchboard_model_cost_usd_total",
    "Estimated cost in US dollars (LiteLLM's cost map, read offline; 0 for unpriced models).",
    ["tenant", "model"],
)
TOOL_CALLS = Counter(
    "switchboard_tool_calls_total",
    "Tool calls, by tool and outcome (ok, error, timeout, rejected).",
    ["tool", "outcome"],
)
TOOL_CALL_SECONDS = Histogram(
    "switchboard_tool_call_seconds", "Duration of one tool call, seconds.", ["tool"], buckets=_SLOW_BUCKETS_S
)
SENDS = Counter(
    "switchboard_sends_total",
    "Outbound parts, by channel and status (sent, retry, failed, dead_letter).",
    ["channel", "status"],
)
HANDOFFS = Counter(
    "switchboard_handoffs_total",
    "Conversations handed to a person, by who asked (ai, customer, rule...).",
    ["actor"],
)
HANDOFF_WAIT_SECONDS = Histogram(
    "switchboard_handoff_wait_seconds",
    "Time from a handoff to the first person taking the conversation, seconds.",
    buckets=_WAIT_BUCKETS_S,
)
GUARDRAIL_DECISIONS = Counter(
    "switchboard_guardrail_decisions_total",
    "Guardrail results by kind (input, output) and decision.",
    ["kind", "decision"],
)
FEEDBACK = Counter("switchboard_feedback_total", "Feedback on replies by rating (up, down).", ["rating"])
EVENT_DELIVERIES = Counter(
    "switchboard_event_deliveries_total", "Event outbox deliveries by outcome.", ["outcome"]
)
EVENTS_PRUNED = Counter(
    "switchboard_events_pruned_total",
    "Rows deleted by the event retention job, by table (event_outbox, webhook_deliveries).",
    ["table"],
)
LEADS_CREATED = Counter("switchboard_leads_created_total", "Leads created.")


def mount_metrics(app: FastAPI) -> None:
    """Add ``GET /metrics`` (Prometheus text format 0.0.4) to ``app``; left out of the OpenAPI schema."""
    from fastapi import Response

    @app.get("/metrics", include_in_schema=False)
    def metrics() -> Response:  # sync: prometheus-client collects under locks; a thread keeps the loop free
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)


def start_metrics_server(host: str, port: int) -> WSGIServer | None:
    """Serve ``/metrics`` on ``host:port`` in a daemon thread (the workers have no HTTP app).

    Returns:
        The server (``shutdown()`` it at exit), or ``None`` when ``port`` is 0 (off).

    Raises:
        OSError: the port is taken.
    """
    if not port:
        return None
    from prometheus_client import start_http_server

    server, _thread = start_http_server(port, addr=host)
    return server
