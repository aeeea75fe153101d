"""Provider health per tenant deployment, in Redis: healthy, failing since T, or probing.

The orchestrator writes it from its turns (:func:`record_turn`): a turn whose every deployment failed
marks the tenant's deployments ``failing`` (since the first such turn); a deployment that answers is
healthy again. The resume job (:mod:`switchboard.inbound.resume`) probes failing tenants and marks them
``probing`` meanwhile. The console's banner, the inbox mark and the Platform page read it.

Keys: ``model_health:<tenant id>`` is a hash ``deployment id -> {"state", "since", "probes",
"next_probe_at"}`` (JSON; a healthy deployment has no field), and ``model_health:failing`` the set of
tenant ids with at least one failing deployment. Times are Unix seconds.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from switchboard.observability import get_logger
from switchboard.queue.jobs import Backoff

__all__ = [
    "MODEL_UNAVAILABLE",
    "PROBE_BACKOFF",
    "DeploymentHealth",
    "failing_tenants",
    "mark_failing",
    "mark_healthy",
    "mark_probe",
    "record_turn",
    "tenant_health",
]

log = get_logger(__name__)

MODEL_UNAVAILABLE = "model_unavailable"
"""The flag of a turn whose every deployment failed (``TurnResult.flags``): the worker keeps the question
waiting for the model (:mod:`switchboard.inbound.resume`) and Analytics counts the turn as a fallback."""
FAILING_SET = "model_health:failing"
PROBE_BACKOFF = Backoff(15.0, 300.0)
"""Wait between two probes of a failing tenant (grows per failed probe, 15 s to 5 min, jittered)."""


def _key(tenant_id: uuid.UUID | str) -> str:
    return f"model_health:{tenant_id}"


@dataclass(frozen=True)
class DeploymentHealth:
    """One failing (or probing) deployment of a tenant."""

    deployment: str
    state: str
    """``failing`` or ``probing``."""
    since: float
    """Unix seconds of the first failure of this outage."""
    probes: int = 0
    """Failed probes so far."""
    next_probe_at: float = 0.0
    """Unix seconds before which the resume job does not probe again."""


async def tenant_health(redis: Any, tenant_id: uuid.UUID | str) -> list[DeploymentHealth]:
    """The tenant's deployments that are not healthy (empty: all healthy), oldest failure first."""
    raw = await redis.hgetall(_key(tenant_id))
    found = []
    for name, value in (raw or {}).items():
        data = json.loads(value)
        found.append(
            DeploymentHealth(
                deployment=name.decode() if isinstance(name, bytes) else str(name),
                state=str(data.get("state", "failing")),
                since=float(data.get("since", 0.0)),
                probes=int(data.get("probes", 0)),
                next_probe_at=float(data.get("next_probe_at", 0.0)),
            )
        )
    return sorted(found, key=lambda h: (h.since, h.deployment))


async def failing_tenants(redis: Any) -> list[str]:
    """Ids of the tenants with at least one deployment that is not healthy."""
    members = await redis.smembers(FAILING_SET)
    return sorted(m.decode() if isinstance(m, bytes) else str(m) for m in members or ())


async def mark_failing(
    redis: Any, tenant_id: uuid.UUID | str, deployments: Iterable[str], *, now: float | None = None
) -> None:
    """``deployments`` of the tenant failed: ``failing``, keeping the time the outage started."""
    now = time.time() if now is None else now
    current = {h.deployment: h for h in await tenant_health(redis, tenant_id)}
    values = {}
    for deployment in deployments:
        known = current.get(deployment)
        values[deployment] = json.dumps(
            {
                "state": "failing",
                "since": known.since if known else now,
                "probes": known.probes if known else 0,
                "next_probe_at": known.next_probe_at if known else now,
            }
        )
    if not values:
        return
    await redis.hset(_key(tenant_id), mapping=values)
    await redis.sadd(FAILING_SET, str(tenant_id))
    if not current:
        log.error("model_provider_failing", tenant_id=str(tenant_id), deployments=sorted(values))


async def mark_probe(
    redis: Any, tenant_id: uuid.UUID | str, *, failed: bool, now: float | None = None
) -> None:
    """A probe of the tenant's deployments starts (``failed=False``: ``probing``) or failed (the next
    one waits :data:`PROBE_BACKOFF`)."""
    now = time.time() if now is None else now
    values = {}
    for health in await tenant_health(redis, tenant_id):
        probes = health.probes + (1 if failed else 0)
        values[health.deployment] = json.dumps(
            {
                "state": "failing" if failed else "probing",
                "since": health.since,
                "probes": probes,
                "next_probe_at": now + PROBE_BACKOFF.delay_s(probes) if failed else health.next_probe_at,
            }
        )
    if values:
        await redis.hset(_key(tenant_id), mapping=values)


async def mark_healthy(
    redis: Any, tenant_id: uuid.UUID | str, deployments: Iterable[str] | None = None
) -> None:
    """``deployments`` (``None``: all) of the tenant answered: healthy again."""
    key = _key(tenant_id)
    if deployments is None:
        had = await redis.delete(key)
    else:
        names = list(deployments)
        had = await redis.hdel(key, *names) if names else 0
    if not await redis.exists(key):
        await redis.srem(FAILING_SET, str(tenant_id))
    if had:
        log.info("model_provider_recovered", tenant_id=str(tenant_id))


async def record_turn(
    redis: Any,
    tenant_id: uuid.UUID | str,
    *,
    unavailable: bool,
    deployments: Iterable[str],
    answered_by: str | None,
) -> None:
    """What one turn says about the tenant's providers: ``unavailable`` (every deployment failed) marks
    ``deployments`` failing; a deployment that answered (``answered_by``) is healthy. Never raises
    (logged): health is a readout, never a reason to fail a turn."""
    try:
        if unavailable:
            await mark_failing(redis, tenant_id, deployments)
        elif answered_by and await redis.exists(_key(tenant_id)):
            await mark_healthy(redis, tenant_id, None)
    except Exception as exc:  # noqa: BLE001 (a readout; logged)
        log.warning("model_health_not_recorded", error=f"{type(exc).__name__}: {exc}"[:300])
