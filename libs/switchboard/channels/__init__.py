"""Where a message enters: one package per channel behind :class:`~switchboard.channels.base.Channel`.

Each channel declares its section of the tenant settings in its own ``settings`` module, which
registers it (:func:`switchboard.tenant_settings.register_section`). Importing this package imports the
``settings`` module of every package in :data:`switchboard.channels.base.BUILTIN_CHANNELS`, and
:mod:`switchboard.tenant_settings` imports this package before it first validates settings, so every
process knows every channel's section. A new channel adds its package name to that tuple, nothing here.
"""

import importlib

from switchboard.channels.base import BUILTIN_CHANNELS

for _name in BUILTIN_CHANNELS:
    importlib.import_module(f"switchboard.channels.{_name}.settings")
