"""Where a message enters: one package per channel behind :class:`~switchboard.channels.base.Channel`."""
