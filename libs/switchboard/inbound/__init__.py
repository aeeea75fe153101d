"""Where a stored message of any channel is processed: one job (:mod:`.job`) of ordered steps
(:mod:`.steps`) over one context (:mod:`.context`); rate limits, media to text and the orchestrator
call live beside them."""

from switchboard.inbound.context import InboundContext, Outcome, WorkerDeps
from switchboard.inbound.job import process_inbound
from switchboard.inbound.steps import SLOWDOWN_TEXT, STEPS

__all__ = ["InboundContext", "Outcome", "WorkerDeps", "process_inbound", "SLOWDOWN_TEXT", "STEPS"]
