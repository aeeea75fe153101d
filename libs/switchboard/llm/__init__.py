"""The LLM layer: the per-tenant LiteLLM Router, trimming, and the offline model (lexical embedding).

``import litellm`` costs about 4 s and 150 MB, so no module imports it at the top:
:func:`import_litellm` loads it on first use. Processes that never call a model (the channel
services, the worker until its first summary) never pay for it; the orchestrator loads it at
start-up so the first customer's turn does not (``tests/test_import_cost.py``).
"""

from __future__ import annotations

from types import ModuleType

__all__ = ["import_litellm"]


def import_litellm() -> ModuleType:
    """The ``litellm`` module, imported on first call, with its "Give Feedback" banner off and its
    loggers writing through structlog (it adds its own coloured handler at import)."""
    import litellm

    from switchboard.observability import adopt_library_loggers

    litellm.suppress_debug_info = True  # no "Give Feedback / Get Help" banner on stdout
    adopt_library_loggers()
    return litellm
