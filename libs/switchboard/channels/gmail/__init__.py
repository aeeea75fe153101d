"""Gmail channel: OAuth, push and polling sync, MIME to clean text, threaded replies (its API sandbox is :mod:`switchboard.standins.gmail`).

Modules: ``client`` (Gmail REST + token calls), ``oauth`` (consent URL, encrypted tokens, refresh),
``mailboxes`` (connecting a mailbox), ``mime`` / ``html`` (a message to clean text), ``safety``
(automated mail, instruction-like text), ``normalize`` (a mail to an ``InboundMessage``), ``sync``
(history → stored mail), ``jobs`` (background-queue jobs), ``push`` (``POST /webhooks/gmail``),
``send`` (a reply in the thread), ``channel`` (the ``Channel``), ``settings``, ``cli``.
Kept free of imports here so importing the settings module stays cheap.
"""
