"""Per-day, per-channel figures of one tenant (the console's analytics page and its admin API).

:func:`tenant_analytics` runs a handful of aggregate queries over the tenant's rows (days in the
tenant's ``locale.timezone``):

* ``conversations``: conversations started; ``handed_off``: started and later handed to a person;
  ``ai_resolved``: started, then closed or idle longer than the tenant's ``memory.inactivity_close_s``
  (``idle_close_s``), with no message from a person and not waiting for one now;
* ``messages_in`` / ``messages_out``: customer messages stored; messages we wrote to the customer (AI
  replies and people's replies), each counted once however many parts the channel split it into, and
  without the model's tool calls and tool results (history rows, never sent);
* ``first_response_p50_s`` / ``_p95_s``: seconds from a conversation's first customer message to our
  first reply to the customer (not the model's first tool call) (conversations started that day);
* ``human_first_response_p50_s``: seconds from a conversation's first hand-over to a person to the
  first message a person wrote to the customer after it (hand-overs of that day);
* ``turns``, ``fallback_rate`` (turns a fallback deployment answered, or whose model calls failed: every
  deployment failed, or the model failed or ran out of time mid-turn),
  ``tokens`` (``usage.total_tokens``),
  ``cost_usd`` (estimated model spend, ``turns.cost_usd``: LiteLLM's price map, unpriced models 0);
* ``tool_calls``, ``tool_error_rate`` (receipts whose outcome is not ``ok``);
* ``feedback_up`` / ``feedback_down`` when the feedback table exists, else absent;
* ``csat``: customer-satisfaction answers given in the period, per who handled the conversation (the
  AI, each WhatsApp agent, each console user): count, average rating (1-5) and share of good answers
  (4 or 5); their totals are ``csat_count``, ``csat_average`` and ``csat_good_share``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import text
from sqlmodel.ext.asyncio.session import AsyncSession

__all__ = ["DayChannel", "Analytics", "CsatFigures", "tenant_analytics", "METRICS", "COUNTS", "CSAT_GOOD"]

CSAT_GOOD = 4
"""A rating at least this high (1-5) counts as a good answer."""

METRICS = (
    "conversations",
    "ai_resolved",
    "handed_off",
    "messages_in",
    "messages_out",
    "first_response_p50_s",
    "first_response_p95_s",
    "human_first_response_p50_s",
    "turns",
    "fallback_rate",
    "tokens",
    "cost_usd",
    "tool_calls",
    "tool_error_rate",
    "feedback_up",
    "feedback_down",
)

COUNTS = frozenset(
    {
        "conversations",
        "ai_resolved",
        "handed_off",
        "messages_in",
        "messages_out",
        "turns",
        "tokens",
        "cost_usd",
        "tool_calls",
        "feedback_up",
        "feedback_down",
    }
)
"""Metrics that add up (0 on a quiet day); the others are rates and times (nothing on a quiet day)."""


@dataclass
class DayChannel:
    """The figures of one day and channel (``None``: nothing to measure that day)."""

    day: date
    channel: str
    values: dict[str, float | None] = field(default_factory=dict)


@dataclass(frozen=True)
class CsatFigures:
    """The satisfaction answers about one handler over the period.

    Attributes:
        handled_by: ``ai``, ``agent`` (a WhatsApp agent) or ``console_user``.
        handler_id: the agent's or user's id (``None`` for the AI, or a removed person).
        name: the person's name as shown (empty for the AI).
        count: answers given.
        average: their mean rating, 1-5, two decimals.
        good_share: the share (0-1) of answers rated ``CSAT_GOOD`` or better.
    """

    handled_by: str
    handler_id: uuid.UUID | None
    name: str
    count: int
    average: float
    good_share: float


@dataclass(frozen=True)
class CsatComment:
    """One customer's comment with their rating (1-5) and who handled the conversation."""

    conversation_id: uuid.UUID
    rating: int
    comment: str
    answered_at: datetime
    handled_by: str
    name: str


@dataclass
class Analytics:
    """Every figure of a period: ``rows`` (one per day and channel that had anything) and the totals."""

    days: list[date]
    channels: list[str]
    rows: list[DayChannel]
    totals: dict[str, float | None]
    has_feedback: bool
    timezone: str
    csat: list[CsatFigures] = field(default_factory=list)
    """Satisfaction per handler, the AI first, then people by name."""
    csat_comments: list[CsatComment] = field(default_factory=list)
    """The customers' comments of the period next to their rating, newest first (at most
    :data:`CSAT_COMMENTS_SHOWN`)."""

    def series(self, metric: str) -> dict[str, list[float | None]]:
        """``{channel: [value per day]}`` of ``metric``, one value for every day of the period: a count is
        0 on a day without data, a rate or a time ``None`` (nothing to measure)."""
        index = {(r.day, r.channel): r.values for r in self.rows}
        empty = 0 if metric in COUNTS else None
        return {
            channel: [index.get((d, channel), {}).get(metric, empty) for d in self.days]
            for channel in self.channels
        }

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "timezone": self.timezone,
            "days": [d.isoformat() for d in self.days],
            "channels": self.channels,
            "has_feedback": self.has_feedback,
            "totals": self.totals,
            "rows": [{"day": r.day.isoformat(), "channel": r.channel, **r.values} for r in self.rows],
            "csat": [
                {
                    "handled_by": c.handled_by,
                    "handler_id": str(c.handler_id) if c.handler_id else None,
                    "name": c.name,
                    "count": c.count,
                    "average": c.average,
                    "good_share": c.good_share,
                }
                for c in self.csat
            ],
            "csat_comments": [
                {
                    "conversation_id": str(c.conversation_id),
                    "rating": c.rating,
                    "comment": c.comment,
                    "answered_at": c.answered_at.isoformat(),
                    "handled_by": c.handled_by,
                    "name": c.name,
                }
                for c in self.csat_comments
            ],
        }


_DAY = "(({col}) AT TIME ZONE :tz)::date"
_TO_CUSTOMER = (
    "m.direction = 'outbound' AND m.role IN ('assistant', 'human_agent') "
    "AND m.kind NOT IN ('tool_call', 'tool_result', 'system')"
)
"""A message we wrote to the customer: an AI or a person's reply, once however many parts it was sent
in; the model's tool calls and results and the hand-back note to the AI (``kind`` system) are history rows
(``direction`` outbound), never sent."""

_BY_PERSON = "m.direction = 'outbound' AND m.role = 'human_agent' AND m.kind NOT IN ('system', 'tool_call', 'tool_result')"
"""A message a person wrote to the customer (not the hand-back note to the AI)."""

_QUERIES: dict[str, str] = {
    "conversations": f"""
        SELECT {_DAY.format(col="c.created_at")} AS day, c.channel,
               count(*) AS conversations,
               count(*) FILTER (WHERE EXISTS (SELECT 1 FROM conversation_events e
                   WHERE e.conversation_id = c.id AND e.to_status = 'human')) AS handed_off,
               count(*) FILTER (
                   WHERE c.status <> 'human'
                     AND (c.closed_at IS NOT NULL
                          OR coalesce((SELECT max(m.created_at) FROM messages m WHERE m.conversation_id = c.id),
                                      c.created_at) < :idle_before)
                     AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id = c.id AND {_BY_PERSON})
               ) AS ai_resolved
        FROM conversations c
        WHERE c.tenant_id = :tenant AND c.created_at >= :since AND NOT c.is_agent_console
        GROUP BY 1, 2""",
    "human_first_response": f"""
        WITH handed AS (
            SELECT c.id, c.channel, min(e.created_at) AS handed_at
            FROM conversations c JOIN conversation_events e ON e.conversation_id = c.id AND e.to_status = 'human'
            WHERE c.tenant_id = :tenant AND e.created_at >= :since
            GROUP BY c.id, c.channel),
        answered AS (
            SELECT h.channel, h.handed_at,
                   (SELECT min(m.created_at) FROM messages m WHERE m.conversation_id = h.id AND {_BY_PERSON}
                        AND m.created_at >= h.handed_at) AS first_person
            FROM handed h)
        SELECT {_DAY.format(col="handed_at")} AS day, channel,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM first_person - handed_at)) AS p50
        FROM answered WHERE first_person IS NOT NULL
        GROUP BY 1, 2""",
    "messages": f"""
        SELECT {_DAY.format(col="m.created_at")} AS day, m.channel,
               count(*) FILTER (WHERE m.direction = 'inbound' AND m.role = 'user') AS messages_in,
               count(*) FILTER (WHERE {_TO_CUSTOMER}) AS messages_out
        FROM messages m
        WHERE m.tenant_id = :tenant AND m.created_at >= :since
        GROUP BY 1, 2""",
    "first_response": f"""
        WITH firsts AS (
            SELECT c.id, c.channel, c.created_at,
                   (SELECT min(m.created_at) FROM messages m WHERE m.conversation_id = c.id
                        AND m.direction = 'inbound' AND m.role = 'user') AS first_in,
                   (SELECT min(m.created_at) FROM messages m WHERE m.conversation_id = c.id
                        AND {_TO_CUSTOMER}) AS first_out
            FROM conversations c WHERE c.tenant_id = :tenant AND c.created_at >= :since)
        SELECT {_DAY.format(col="created_at")} AS day, channel,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM first_out - first_in)) AS p50,
               percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM first_out - first_in)) AS p95
        FROM firsts WHERE first_in IS NOT NULL AND first_out IS NOT NULL AND first_out >= first_in
        GROUP BY 1, 2""",
    "turns": f"""
        SELECT {_DAY.format(col="t.created_at")} AS day, c.channel,
               count(*) AS turns,
               -- a turn whose model calls failed is no answer by the first deployment either
               count(*) FILTER (
                   WHERE t.fallback_used
                      OR coalesce((t.result->'flags')::jsonb, '[]'::jsonb) @> '["model_unavailable"]'::jsonb
                      OR (t.outcome = 'degraded'
                          AND (t.error LIKE 'model_failed%' OR t.error = 'turn_timeout'))
               ) AS fallbacks,
               coalesce(sum((t.usage->>'total_tokens')::bigint), 0) AS tokens,
               coalesce(sum(t.cost_usd), 0) AS cost_usd
        FROM turns t JOIN conversations c ON c.id = t.conversation_id
        WHERE t.tenant_id = :tenant AND t.created_at >= :since
        GROUP BY 1, 2""",
    "tools": f"""
        SELECT {_DAY.format(col="r.created_at")} AS day, coalesce(c.channel, 'none') AS channel,
               count(*) AS tool_calls, count(*) FILTER (WHERE r.outcome <> 'ok') AS tool_errors
        FROM tool_receipts r LEFT JOIN conversations c ON c.id = r.conversation_id
        WHERE r.tenant_id = :tenant AND r.created_at >= :since
        GROUP BY 1, 2""",
}


def _period(query: str) -> str:
    """``query`` over the whole period: its day and channel grouping dropped."""
    head, _, tail = query.rpartition("SELECT ")
    select = tail.split(" AS day, channel,", 1)[1]
    return head + "SELECT " + select.replace("GROUP BY 1, 2", "")


_FEEDBACK = f"""
    SELECT {_DAY.format(col="f.created_at")} AS day, coalesce(c.channel, 'none') AS channel,
           count(*) FILTER (WHERE f.rating = 'up') AS up, count(*) FILTER (WHERE f.rating = 'down') AS down
    FROM feedback f LEFT JOIN messages m ON m.id = f.message_id LEFT JOIN conversations c ON c.id = m.conversation_id
    WHERE f.tenant_id = :tenant AND f.created_at >= :since
    GROUP BY 1, 2"""


_CSAT = """
    SELECT a.handled_by, coalesce(a.agent_id, a.user_id) AS handler_id,
           coalesce(h.name, u.name, u.email, '') AS name,
           count(*) AS answers, sum(a.rating) AS total,
           count(*) FILTER (WHERE a.rating >= :good) AS good
    FROM csat_answers a
    LEFT JOIN human_agents h ON h.id = a.agent_id
    LEFT JOIN console_users u ON u.id = a.user_id
    WHERE a.tenant_id = :tenant AND a.answered_at >= :since AND a.rating IS NOT NULL
    GROUP BY 1, 2, 3
    ORDER BY (a.handled_by <> 'ai'), 3, 2"""


_CSAT_COMMENTS = """
    SELECT a.conversation_id, a.rating, a.comment, a.answered_at, a.handled_by,
           coalesce(h.name, u.name, u.email, '') AS name
    FROM csat_answers a
    LEFT JOIN human_agents h ON h.id = a.agent_id
    LEFT JOIN console_users u ON u.id = a.user_id
    WHERE a.tenant_id = :tenant AND a.answered_at >= :since AND a.rating IS NOT NULL
      AND a.comment IS NOT NULL
    ORDER BY a.answered_at DESC
    LIMIT :limit"""

CSAT_COMMENTS_SHOWN = 20
"""The newest comments of the period analytics lists."""


def _ratio(part: float, whole: float) -> float | None:
    return round(part / whole, 4) if whole else None


async def tenant_analytics(
    session: AsyncSession,
    tenant_id: uuid.UUID,
    *,
    days: int = 14,
    timezone: str = "UTC",
    idle_close_s: float = 86_400.0,
    today: date | None = None,
    now: datetime | None = None,
) -> Analytics:
    """The figures of the last ``days`` days (today included) in ``timezone``.

    Args:
        idle_close_s: a conversation without messages for this long counts as finished (the tenant's
            ``memory.inactivity_close_s``), seconds.
        now: the moment "idle" is measured from (default: now).

    Raises:
        zoneinfo.ZoneInfoNotFoundError: ``timezone`` is not an IANA name (the settings validate it).
    """
    zone = ZoneInfo(timezone)
    now = now or datetime.now(zone)
    today = today or now.astimezone(zone).date()
    first = today - timedelta(days=days - 1)
    since = datetime.combine(first, datetime.min.time(), tzinfo=zone)
    idle_before = now - timedelta(seconds=idle_close_s)
    params = {"tenant": tenant_id, "since": since, "tz": timezone, "idle_before": idle_before}
    cells: dict[tuple[date, str], dict[str, float]] = {}
    totals_p50: dict[str, float | None] = {}
    raw: dict[tuple[date, str], dict[str, float]] = {}

    def cell(day: date, channel: str) -> dict[str, float]:
        raw.setdefault((day, channel), {})
        return cells.setdefault((day, channel), {})

    for row in (await session.execute(text(_QUERIES["conversations"]), params)).mappings():
        c = cell(row["day"], row["channel"])
        c.update(
            conversations=row["conversations"], handed_off=row["handed_off"], ai_resolved=row["ai_resolved"]
        )
    for row in (await session.execute(text(_QUERIES["messages"]), params)).mappings():
        cell(row["day"], row["channel"]).update(
            messages_in=row["messages_in"], messages_out=row["messages_out"]
        )
    for row in (await session.execute(text(_QUERIES["first_response"]), params)).mappings():
        cell(row["day"], row["channel"]).update(
            first_response_p50_s=round(float(row["p50"]), 2), first_response_p95_s=round(float(row["p95"]), 2)
        )
    for row in (await session.execute(text(_QUERIES["human_first_response"]), params)).mappings():
        cell(row["day"], row["channel"]).update(human_first_response_p50_s=round(float(row["p50"]), 2))
    for row in (await session.execute(text(_QUERIES["turns"]), params)).mappings():
        c = cell(row["day"], row["channel"])
        raw[(row["day"], row["channel"])].update(turns=row["turns"], fallbacks=row["fallbacks"])
        c.update(
            turns=row["turns"],
            fallback_rate=_ratio(row["fallbacks"], row["turns"]),
            tokens=int(row["tokens"]),
            cost_usd=round(float(row["cost_usd"]), 6),
        )
    for row in (await session.execute(text(_QUERIES["tools"]), params)).mappings():
        c = cell(row["day"], row["channel"])
        raw[(row["day"], row["channel"])].update(tool_calls=row["tool_calls"], tool_errors=row["tool_errors"])
        c.update(tool_calls=row["tool_calls"], tool_error_rate=_ratio(row["tool_errors"], row["tool_calls"]))
    has_feedback = bool((await session.execute(text("SELECT to_regclass('feedback') IS NOT NULL"))).scalar())
    if has_feedback:
        for row in (await session.execute(text(_FEEDBACK), params)).mappings():
            cell(row["day"], row["channel"]).update(feedback_up=row["up"], feedback_down=row["down"])

    csat_rows = list((await session.execute(text(_CSAT), {**params, "good": CSAT_GOOD})).mappings())
    csat = [
        CsatFigures(
            handled_by=row["handled_by"],
            handler_id=row["handler_id"],
            name=row["name"],
            count=row["answers"],
            average=round(row["total"] / row["answers"], 2),
            good_share=round(row["good"] / row["answers"], 4),
        )
        for row in csat_rows
    ]
    comments = [
        CsatComment(**row)
        for row in (
            await session.execute(text(_CSAT_COMMENTS), {**params, "limit": CSAT_COMMENTS_SHOWN})
        ).mappings()
    ]
    for name, metric in (
        ("first_response", "first_response_p50_s"),
        ("human_first_response", "human_first_response_p50_s"),
    ):
        median = (await session.execute(text(_period(_QUERIES[name])), params)).mappings().first()
        totals_p50[metric] = round(float(median["p50"]), 2) if median and median["p50"] is not None else None
    day_list = [first + timedelta(days=n) for n in range(days)]
    channels = sorted({channel for _, channel in cells})
    rows = [DayChannel(day=d, channel=ch, values=dict(v)) for (d, ch), v in sorted(cells.items())]
    totals: dict[str, float | None] = {}
    for metric in (
        "conversations",
        "ai_resolved",
        "handed_off",
        "messages_in",
        "messages_out",
        "turns",
        "tokens",
        "tool_calls",
        "feedback_up",
        "feedback_down",
    ):
        totals[metric] = sum(v.get(metric, 0) or 0 for v in cells.values())
    totals["cost_usd"] = round(sum(v.get("cost_usd", 0) or 0 for v in cells.values()), 6)
    totals["fallback_rate"] = _ratio(sum(r.get("fallbacks", 0) for r in raw.values()), totals["turns"] or 0)
    totals["tool_error_rate"] = _ratio(
        sum(r.get("tool_errors", 0) for r in raw.values()), totals["tool_calls"] or 0
    )
    totals.update(totals_p50)
    ups, downs = totals["feedback_up"] or 0, totals["feedback_down"] or 0
    totals["feedback_up_ratio"] = _ratio(ups, ups + downs)
    answers = sum(row["answers"] for row in csat_rows)
    totals["csat_count"] = answers
    rating_sum = sum(row["total"] for row in csat_rows)
    totals["csat_average"] = round(rating_sum / answers, 2) if answers else None
    totals["csat_good_share"] = _ratio(sum(row["good"] for row in csat_rows), answers)
    return Analytics(
        days=day_list,
        channels=channels,
        rows=rows,
        totals=totals,
        has_feedback=has_feedback,
        timezone=timezone,
        csat=csat,
        csat_comments=comments,
    )
