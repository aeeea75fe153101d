"""Where a message enters: one package per channel behind :class:`~switchboard.channels.base.Channel`.

Each channel declares its section of the tenant settings in its own ``settings`` module, which
registers it (:func:`switchboard.tenant_settings.register_section`). They are imported here, and
:mod:`switchboard.tenant_settings` imports this package before it first validates settings, so every
process knows every channel's section. A new channel adds its settings module to this list, and its
``channel`` module to :data:`switchboard.channels.base.BUILTIN_CHANNEL_MODULES`.
"""

from switchboard.channels.gmail import settings as gmail_settings
from switchboard.channels.whatsapp import settings as whatsapp_settings

__all__ = ["gmail_settings", "whatsapp_settings"]
