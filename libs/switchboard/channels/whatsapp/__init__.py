"""WhatsApp Cloud API channel: webhook route, normalize, store + enqueue, the Channel adapter, tenant
settings (its sandbox is :mod:`switchboard.standins.whatsapp`).

The public names load on first use (PEP 562 module ``__getattr__``): every process imports
``switchboard.channels.whatsapp.settings`` (its tenant-settings section), and importing the package
for that must not pull in the routes, sandbox and Graph client (``make run`` start-up time).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from switchboard.channels.meta import sign_body, signature_is_valid
    from switchboard.channels.whatsapp.channel import WhatsAppChannel
    from switchboard.channels.whatsapp.normalize import NormalizedDelivery, StatusUpdate, normalize_delivery
    from switchboard.channels.whatsapp.routes import webhook_router
    from switchboard.channels.whatsapp.send import GraphClient, GraphSendError
    from switchboard.channels.whatsapp.settings import WhatsAppSettings

# public name -> module that defines it
_LAZY = {
    "sign_body": "switchboard.channels.meta",
    "signature_is_valid": "switchboard.channels.meta",
    "WhatsAppChannel": "switchboard.channels.whatsapp.channel",
    "NormalizedDelivery": "switchboard.channels.whatsapp.normalize",
    "StatusUpdate": "switchboard.channels.whatsapp.normalize",
    "normalize_delivery": "switchboard.channels.whatsapp.normalize",
    "webhook_router": "switchboard.channels.whatsapp.routes",
    "GraphClient": "switchboard.channels.whatsapp.send",
    "GraphSendError": "switchboard.channels.whatsapp.send",
    "WhatsAppSettings": "switchboard.channels.whatsapp.settings",
}

__all__ = [  # the keys of _LAZY (spelled out for linters and IDEs)
    "GraphClient",
    "GraphSendError",
    "NormalizedDelivery",
    "StatusUpdate",
    "WhatsAppChannel",
    "WhatsAppSettings",
    "normalize_delivery",
    "sign_body",
    "signature_is_valid",
    "webhook_router",
]


def __getattr__(name: str) -> Any:
    """Import the module behind a public name on first access; AttributeError for anything else."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
