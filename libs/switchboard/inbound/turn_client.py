"""The worker's call to the orchestrator: ``POST /v1/turns`` with the service token.

Transport failures (connection refused, reset, timeout) are retried twice in-process with a short
back-off (tenacity); what is still failing is raised as :class:`OrchestratorUnavailable` and the job
turns it into ``Retry(defer=...)``. An answer that is not a valid :class:`TurnResult` (wrong status,
not JSON, both or neither of reply/silent) raises :class:`ContractViolation`.
"""

from __future__ import annotations

import httpx
from pydantic import ValidationError
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

from switchboard.contracts import TurnRequest, TurnResult
from switchboard.errors import SwitchboardError

__all__ = ["OrchestratorUnavailable", "ContractViolation", "request_turn"]


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
        timeout_s: whole-request timeout (above the orchestrator's 120 s turn budget).

    Raises:
        OrchestratorUnavailable: network failure, timeout, 5xx or 429 (after 2 quick in-process retries).
        ContractViolation: any other answer that is not a valid ``TurnResult``.
    """
    url = base_url.rstrip("/") + "/v1/turns"
    headers = {"Authorization": f"Bearer {token}"}
    response: httpx.Response | None = None
    try:
        async for attempt in AsyncRetrying(
            stop=stop_after_attempt(3),
            wait=wait_exponential_jitter(multiplier=0.1, max=0.5),
            retry=retry_if_exception_type((httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)),
            reraise=True,
        ):
            with attempt:
                response = await client.post(
                    url, json=request.model_dump(mode="json"), headers=headers, timeout=timeout_s
                )
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
