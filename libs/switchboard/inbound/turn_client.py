"""The worker's call to the orchestrator: ``POST /v1/turns`` with the service token.

Transport failures (connection refused, reset, timeout) are retried twice in-process with a short
back-off (tenacity); what is still failing is raised as :class:`OrchestratorUnavailable` and the job
turns it into ``Retry(defer=...)``. A 503 ``warming`` answer (an orchestrator just started, still
loading LiteLLM: :mod:`switchboard.warming`) is asked again after its ``Retry-After``, for up to
:data:`WARMING_RETRY_FOR_S`; it counts as no attempt and takes nothing from ``timeout_s``, which
each call gets whole. An answer that is not a valid :class:`TurnResult` (wrong status,
not JSON, both or neither of reply/silent) raises :class:`ContractViolation`.
"""

from __future__ import annotations

import asyncio
import time

import httpx
from pydantic import ValidationError
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

from switchboard.contracts import TurnRequest, TurnResult
from switchboard.errors import SwitchboardError
from switchboard.observability import get_logger
from switchboard.warming import WARMING

__all__ = ["OrchestratorUnavailable", "ContractViolation", "request_turn"]

log = get_logger(__name__)

WARMING_RETRY_FOR_S = 60.0
"""How long the worker keeps asking an orchestrator that answers 503 ``warming`` (LiteLLM loads in
~4 s idle, 15 s at load 10); then the 503 is an :class:`OrchestratorUnavailable` like any other.
Kept below the job timeout minus one whole turn (``inbound_job_timeout_s`` 200 s, turns 130 s)."""


class OrchestratorUnavailable(SwitchboardError):
    """The orchestrator could not be reached or answered 5xx/429; retry later."""


class ContractViolation(SwitchboardError):
    """The orchestrator answered something that is not a ``TurnResult`` (reply XOR silent).

    Attributes:
        status_code: HTTP status of the answer.
        detail: short description of what was wrong (no customer text).
    """

    def __init__(self, status_code: int, detail: str) -> None:
        self.status_code = status_code
        self.detail = detail
        super().__init__(f"orchestrator contract violation (HTTP {status_code}): {detail}")


async def request_turn(
    client: httpx.AsyncClient, *, base_url: str, token: str, request: TurnRequest, timeout_s: float
) -> TurnResult:
    """Ask the orchestrator for one turn.

    Args:
        client: shared HTTP client.
        base_url: orchestrator root, e.g. ``http://127.0.0.1:8100``.
        token: service bearer token.
        request: the turn to run.
        timeout_s: whole-request timeout (above the orchestrator's 120 s turn budget), of each call:
            a ``warming`` answer and the pause after it do not count.

    Raises:
        OrchestratorUnavailable: network failure, timeout, 5xx or 429 (after 2 quick in-process retries).
        ContractViolation: any other answer that is not a valid ``TurnResult``.
    """
    url = base_url.rstrip("/") + "/v1/turns"
    headers = {"Authorization": f"Bearer {token}"}
    warming_until = time.monotonic() + WARMING_RETRY_FOR_S
    response: httpx.Response | None = None
    try:
        async for attempt in AsyncRetrying(
            stop=stop_after_attempt(3),
            wait=wait_exponential_jitter(multiplier=0.1, max=0.5),
            retry=retry_if_exception_type((httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)),
            reraise=True,
        ):
            with attempt:
                while True:
                    response = await client.post(
                        url, json=request.model_dump(mode="json"), headers=headers, timeout=timeout_s
                    )
                    pause = _warming_pause(response)
                    if pause is None or time.monotonic() + pause >= warming_until:
                        break
                    log.info(
                        "orchestrator_warming_retry",
                        tenant_id=str(request.tenant_id),
                        conversation_id=str(request.conversation_id),
                        retry_in_s=pause,
                    )
                    await asyncio.sleep(pause)
    except httpx.HTTPError as exc:
        raise OrchestratorUnavailable(f"orchestrator unreachable: {type(exc).__name__}") from exc
    assert response is not None
    if response.status_code >= 500 or response.status_code == 429:
        raise OrchestratorUnavailable(f"orchestrator answered HTTP {response.status_code}")
    if response.status_code != 200:
        raise ContractViolation(response.status_code, f"unexpected HTTP status {response.status_code}")
    try:
        return TurnResult.model_validate_json(response.content)
    except ValidationError as exc:
        first = exc.errors()[0] if exc.errors() else {}
        raise ContractViolation(200, str(first.get("msg", "invalid TurnResult"))[:200]) from None


def _warming_pause(response: httpx.Response) -> float | None:
    """Seconds to wait before asking again when ``response`` is the orchestrator's 503 ``warming``
    (its ``Retry-After``, 1 s if unreadable, at most 5 s); ``None`` for any other answer."""
    if response.status_code != 503:
        return None
    try:
        if response.json().get("detail") != WARMING:
            return None
    except ValueError:
        return None
    try:
        return min(max(float(response.headers.get("Retry-After", "1")), 0.1), 5.0)
    except ValueError:
        return 1.0
