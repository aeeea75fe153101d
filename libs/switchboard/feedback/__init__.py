"""Feedback on the agent's messages (docs/agent.md#feedback): stored per (message, source), joined to turn and trace.

* :func:`record_feedback` (:mod:`.store`): the one writer (the console and the API call it).
* :mod:`.routes`: ``POST /v1/messages/{id}/feedback`` (admin token or the tenant's app key) and
  ``POST /v1/admin/tenants/{slug}/feedback/app-key``.
* :mod:`.langfuse`: the optional export as a Langfuse score (the SDK is not a dependency).
"""

from switchboard.db.models import Feedback
from switchboard.feedback.store import FeedbackRejected, Rating, app_key_matches, new_app_key, record_feedback

__all__ = ["Feedback", "FeedbackRejected", "Rating", "record_feedback", "new_app_key", "app_key_matches"]
