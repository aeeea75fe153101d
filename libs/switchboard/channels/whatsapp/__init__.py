"""WhatsApp Cloud API channel: webhook route, normalize, store + enqueue, the Channel adapter, sandbox,
tenant settings."""

from switchboard.channels.meta import sign_body, signature_is_valid
from switchboard.channels.whatsapp.channel import WhatsAppChannel
from switchboard.channels.whatsapp.normalize import NormalizedDelivery, StatusUpdate, normalize_delivery
from switchboard.channels.whatsapp.routes import webhook_router
from switchboard.channels.whatsapp.sandbox import GraphSandbox, sandbox_router, sandbox_status_sender
from switchboard.channels.whatsapp.send import GraphClient, GraphSendError
from switchboard.channels.whatsapp.settings import WhatsAppSettings

__all__ = [
    "GraphClient",
    "GraphSandbox",
    "GraphSendError",
    "NormalizedDelivery",
    "StatusUpdate",
    "WhatsAppSettings",
    "normalize_delivery",
    "sandbox_router",
    "sandbox_status_sender",
    "sign_body",
    "signature_is_valid",
    "WhatsAppChannel",
    "webhook_router",
]
