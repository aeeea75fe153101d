"""WhatsApp Cloud API channel: verify, normalize, store + enqueue, send, statuses, sandbox, tenant settings."""

from switchboard.channels.whatsapp.normalize import NormalizedDelivery, StatusUpdate, normalize_delivery
from switchboard.channels.whatsapp.routes import webhook_router
from switchboard.channels.whatsapp.sandbox import GraphSandbox, sandbox_router
from switchboard.channels.whatsapp.send import GraphClient, GraphSendError, split_text
from switchboard.channels.whatsapp.settings import WhatsAppSettings
from switchboard.channels.whatsapp.verify import sign_body, signature_is_valid

__all__ = [
    "GraphClient",
    "GraphSandbox",
    "GraphSendError",
    "NormalizedDelivery",
    "StatusUpdate",
    "WhatsAppSettings",
    "normalize_delivery",
    "sandbox_router",
    "sign_body",
    "signature_is_valid",
    "split_text",
    "webhook_router",
]
