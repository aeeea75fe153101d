"""Export of feedback to Langfuse as a score on the turn's trace (optional).

Enabled when ``LANGFUSE_PUBLIC_KEY`` and ``LANGFUSE_SECRET_KEY`` are set (``LANGFUSE_HOST`` optional).
The ``langfuse`` SDK is **not** a dependency of Switchboard: install it next to it (``pip install
langfuse``) to export. It is imported on first use; with the keys set and the package missing, one
``langfuse_sdk_missing`` warning is logged and nothing is exported (feedback is stored either way).

The score: name ``user_feedback``, ``BOOLEAN`` value 1 (up) / 0 (down), the comment, on trace
``feedback.trace_id`` (our 32-hex trace ids are valid Langfuse/OTel trace ids), with the feedback
row's id as the score id, so re-exporting a changed rating updates the same score.

:class:`ScoreExporter` is the seam: :func:`exporter_from_settings` gives the Langfuse one or
``None``; tests and other backends can pass their own.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Protocol

from switchboard.observability import get_logger

if TYPE_CHECKING:
    from switchboard.db.models import Feedback
    from switchboard.settings import Settings

__all__ = ["SCORE_NAME", "ScoreExporter", "LangfuseScoreExporter", "exporter_from_settings", "score_of"]

log = get_logger(__name__)

SCORE_NAME = "user_feedback"
_missing_logged = False


class ScoreExporter(Protocol):
    """Sends one feedback row somewhere as a score; returns whether it was sent."""

    async def export(self, feedback: Feedback) -> bool: ...


def score_of(feedback: Feedback) -> dict[str, Any]:
    """The score's fields (Langfuse ``create_score`` keyword arguments)."""
    return {
        "score_id": str(feedback.id),
        "trace_id": feedback.trace_id,
        "name": SCORE_NAME,
        "value": 1 if feedback.rating == "up" else 0,
        "data_type": "BOOLEAN",
        "comment": feedback.comment,
    }


class LangfuseScoreExporter:
    """Exports through the Langfuse SDK (``Langfuse(...).create_score(...)`` then ``flush()``)."""

    def __init__(self, *, public_key: str, secret_key: str, host: str | None) -> None:
        self._keys = {"public_key": public_key, "secret_key": secret_key, **({"host": host} if host else {})}
        self._client: Any = None

    def _get_client(self) -> Any:
        global _missing_logged
        if self._client is None:
            try:
                from langfuse import Langfuse  # type: ignore[import-not-found,unused-ignore]
            except ImportError:
                if not _missing_logged:
                    log.warning(
                        "langfuse_sdk_missing",
                        detail="LANGFUSE_PUBLIC_KEY/LANGFUSE_SECRET_KEY are set but the langfuse package is "
                        "not installed: feedback is stored, not exported (pip install langfuse)",
                    )
                    _missing_logged = True
                return None
            self._client = Langfuse(**self._keys)
        return self._client

    async def export(self, feedback: Feedback) -> bool:
        if not feedback.trace_id:
            log.info("feedback_not_exported", reason="no_trace_id", feedback_id=str(feedback.id))
            return False
        client = self._get_client()
        if client is None:
            return False
        score = score_of(feedback)

        def send() -> None:  # the SDK is synchronous (it batches in a thread of its own)
            client.create_score(**score)
            client.flush()

        try:
            await asyncio.to_thread(send)
        except Exception as exc:  # noqa: BLE001 (an export failure never loses the stored feedback; logged)
            log.warning(
                "feedback_export_failed",
                feedback_id=str(feedback.id),
                trace_id=feedback.trace_id,
                error=f"{type(exc).__name__}: {exc}"[:300],
            )
            return False
        log.info("feedback_exported", feedback_id=str(feedback.id), trace_id=feedback.trace_id, to="langfuse")
        return True


def exporter_from_settings(settings: Settings) -> ScoreExporter | None:
    """The Langfuse exporter when both keys are set, else ``None`` (no export, nothing logged)."""
    if not settings.langfuse_enabled:
        return None
    assert settings.langfuse_public_key is not None and settings.langfuse_secret_key is not None
    return LangfuseScoreExporter(
        public_key=settings.langfuse_public_key.get_secret_value(),
        secret_key=settings.langfuse_secret_key.get_secret_value(),
        host=settings.langfuse_host,
    )
