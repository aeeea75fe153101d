"""The time budget of one turn: every model and tool call of the turn draws from it.

One :class:`TurnBudget` is made when the turn is claimed and handed to the input guardrail, the history
summary, the tool loop and every tool call, so the calls of a turn share one deadline instead of each
waiting its own timeout in a row. A call's timeout is ``min(its own, what is left)``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

__all__ = ["TurnBudget"]


@dataclass(frozen=True)
class TurnBudget:
    """A deadline on the ``time.monotonic()`` clock.

    Attributes:
        deadline: ``time.monotonic()`` at which the turn's time is up (seconds).
    """

    deadline: float

    @classmethod
    def starting_now(cls, seconds: float) -> TurnBudget:
        """A budget of ``seconds`` from now."""
        return cls(time.monotonic() + seconds)

    def left_s(self) -> float:
        """Seconds left (0 once the deadline has passed, never negative)."""
        return max(0.0, self.deadline - time.monotonic())

    def timeout_s(self, own_s: float) -> float:
        """The timeout of a call whose own timeout is ``own_s``: ``min(own_s, left)`` seconds."""
        return min(own_s, self.left_s())

    def deadline_for(self, own_s: float) -> float:
        """The monotonic deadline of a call whose own timeout is ``own_s`` (never past the turn's)."""
        return min(time.monotonic() + own_s, self.deadline)
