"""The LLM layer: the per-tenant LiteLLM Router, trimming, and the offline model (lexical embedding).

``import litellm`` costs about 4 s and 150 MB, so no module imports it at the top:
:func:`import_litellm` loads it on first use. Processes that never call a model (the channel
services, the worker until its first summary) never pay for it. The orchestrator loads it in a
background thread once it is up (:func:`start_litellm_import`, its ``/healthz`` says ``warming``
meanwhile) and its requests await that thread without blocking the event loop
(:mod:`switchboard.warming`; ``tests/runtime/test_import_cost.py``,
``tests/channels/instagram/test_warm_start.py``).
"""

from __future__ import annotations

import concurrent.futures
from types import ModuleType

__all__ = ["import_litellm", "start_litellm_import"]


def import_litellm() -> ModuleType:
    """The ``litellm`` module, imported on first call, with its "Give Feedback" banner off and its
    loggers writing through structlog (it adds its own coloured handler at import).

    On an event loop, call it only where no thread may be importing it (the orchestrator's requests
    wait for :func:`start_litellm_import` first, :class:`switchboard.service_app.ServiceApp`): while
    another thread runs the import, this call waits on Python's import lock and holds up the loop.
    """
    import litellm

    from switchboard.observability import adopt_library_loggers

    litellm.suppress_debug_info = True  # no "Give Feedback / Get Help" banner on stdout
    adopt_library_loggers()
    from switchboard.egress import install_in_litellm

    install_in_litellm(litellm)  # every connection through the outbound-address policy
    return litellm


def start_litellm_import() -> concurrent.futures.Future[ModuleType]:
    """Start importing LiteLLM (:func:`import_litellm`) in a daemon thread ``litellm-import``, once per
    process (:func:`switchboard.warming.start_import`); returns the future of the module."""
    from switchboard.warming import start_import

    return start_import("litellm", import_litellm)
