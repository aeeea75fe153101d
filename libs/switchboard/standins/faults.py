"""Fault scripts for the local provider sandboxes (Graph API for WhatsApp and Instagram, Gmail):
channel-neutral, so every sandbox scripts failures the same way and whole-system tests can make a
provider fail on cue.

A :class:`FaultScript` holds queues keyed by ``(operation, key)``: ``operation`` is what the sandbox
is asked to do (``"send"``, ``"media"``, ...), ``key`` what it is done to or by (a recipient, a
business number, a media id, or ``"*"`` for any). Each call the sandbox serves takes the next entry
of the first matching queue (:meth:`FaultScript.next`); an entry is a :class:`Fault` or a
pass-through, so ``after=2, times=1`` means "the 3rd call fails" and ``times=3`` "the next three
calls fail".

Control access (:func:`require_control_access`): control endpoints answer loopback clients only and,
when the service has an admin token, only requests carrying ``Authorization: Bearer <admin token>``.
"""

from __future__ import annotations

import hmac
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

from fastapi import HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "Fault",
    "FaultMode",
    "FaultScript",
    "FaultSpec",
    "LOOPBACK_HOSTS",
    "require_control_access",
]

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost", "testclient"})
"""Client hosts allowed on control endpoints (``testclient``: Starlette's test client)."""
MAX_QUEUED = 10_000
"""Entries one queue may hold (bounded memory: a script longer than this is refused)."""

FaultMode = Literal["error", "accept_then_500", "accept_then_hang", "delay", "status_first"]
"""What a scripted call does:

* ``error``: not performed; answered with ``http_status``, ``headers`` and the provider's error body
  for ``code`` (or ``body`` as given), after ``delay_s``;
* ``accept_then_500``: performed (recorded), then the answer is lost: a 500 that is not the
  provider's error shape (a proxy whose upstream died after accepting);
* ``accept_then_hang``: performed, then the answer waits ``delay_s`` (the caller times out first);
* ``delay``: performed and answered normally after ``delay_s``;
* ``status_first``: performed, then the provider's status callbacks (``statuses``) are delivered to
  the channel's webhook *before* the answer (a race real providers produce).
"""


@dataclass(frozen=True)
class Fault:
    """One scripted answer of a sandbox (see :data:`FaultMode`)."""

    mode: FaultMode = "error"
    code: int = 131000
    """Provider error code (Meta's ``error.code``; a sandbox without codes ignores it)."""
    http_status: int = 400
    headers: dict[str, str] = field(default_factory=dict)
    """Extra answer headers, e.g. ``{"Retry-After": "7"}``."""
    body: Any = None
    """Raw answer body (JSON value or text) instead of the provider's error body for ``code``."""
    delay_s: float = 0.0
    statuses: tuple[str, ...] = ("sent", "delivered")
    """``status_first``: the callbacks delivered before the answer, in order."""


class FaultSpec(BaseModel):
    """Body of a sandbox's ``POST .../_control/failures``: one fault, which calls it applies to.

    Exactly one key field the sandbox understands must be set (``to`` or ``phone_number_id`` for a
    Graph send, ``media_id`` for a media lookup; ``"*"`` matches any).
    """

    model_config = ConfigDict(extra="forbid")

    operation: str = Field("send", min_length=1, max_length=32)
    to: str | None = None
    phone_number_id: str | None = None
    media_id: str | None = None
    mode: FaultMode = "error"
    times: int = Field(1, ge=1, le=1000)
    """How many consecutive calls get the fault."""
    after: int = Field(0, ge=0, le=1000)
    """Calls passed through untouched first (``after=N-1``: the N-th call fails)."""
    code: int = 131000
    http_status: int | None = Field(None, ge=100, le=599)
    """Default 500 for ``accept_then_500``, else 400."""
    headers: dict[str, str] = Field(default_factory=dict)
    body: Any = None
    delay_s: float = Field(0.0, ge=0, le=600)
    statuses: list[str] = Field(default_factory=lambda: ["sent", "delivered"], max_length=5)

    def fault(self) -> Fault:
        return Fault(
            mode=self.mode,
            code=self.code,
            http_status=self.http_status or (500 if self.mode == "accept_then_500" else 400),
            headers=dict(self.headers),
            body=self.body,
            delay_s=self.delay_s,
            statuses=tuple(self.statuses),
        )


@dataclass
class FaultScript:
    """Queues of faults per ``(operation, key)``; ``None`` entries are pass-throughs (``after``)."""

    queues: dict[tuple[str, str], deque[Fault | None]] = field(default_factory=dict)

    def add(self, operation: str, key: str, fault: Fault, *, times: int = 1, after: int = 0) -> int:
        """Queue ``after`` pass-throughs then ``times`` copies of ``fault`` for ``(operation, key)``.

        Returns:
            How many entries that queue holds now.

        Raises:
            ValueError: the queue would exceed :data:`MAX_QUEUED`.
        """
        queue = self.queues.setdefault((operation, key), deque())
        if len(queue) + after + times > MAX_QUEUED:
            raise ValueError(f"a fault queue holds at most {MAX_QUEUED} entries")
        queue.extend([None] * after)
        queue.extend([fault] * times)
        return len(queue)

    def next(self, operation: str, *keys: str) -> Fault | None:
        """The fault for this call: the next entry of the first of ``keys`` (then ``"*"``) with a queue.

        Consumes that entry (a pass-through is consumed too and gives ``None``).
        """
        for key in (*keys, "*"):
            queue = self.queues.get((operation, key))
            if queue:
                entry = queue.popleft()
                if not queue:
                    del self.queues[(operation, key)]
                return entry
        return None

    def clear(self, operation: str, key: str) -> int:
        """Drop the unused entries of one queue; returns how many faults (not pass-throughs) were dropped."""
        queue = self.queues.pop((operation, key), deque())
        return sum(1 for entry in queue if entry is not None)

    def pending(self, operation: str, key: str) -> int:
        """Faults (not pass-throughs) still queued for ``(operation, key)``."""
        return sum(1 for entry in self.queues.get((operation, key), ()) if entry is not None)


def require_control_access(request: Request, admin_token: str | None) -> None:
    """Refuse a control request unless it comes from loopback and, when ``admin_token`` is set, carries
    ``Authorization: Bearer <admin_token>`` (compared in constant time).

    Raises:
        HTTPException: 403 for a non-loopback client, 401 for a missing or wrong token.
    """
    host = request.client.host if request.client else ""
    if host not in LOOPBACK_HOSTS:
        raise HTTPException(status_code=403, detail="sandbox control endpoints answer loopback clients only")
    if admin_token:
        given = request.headers.get("authorization", "")
        scheme, _, token = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.encode(), admin_token.encode()):
            raise HTTPException(
                status_code=401,
                detail="sandbox control endpoints need the admin token (Authorization: Bearer ...)",
                headers={"WWW-Authenticate": "Bearer"},
            )
