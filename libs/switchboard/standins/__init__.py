"""Local stand-ins for what sits outside Switchboard, so it runs and is tested with no account anywhere.

* :mod:`~switchboard.standins.whatsapp`, :mod:`~switchboard.standins.instagram`,
  :mod:`~switchboard.standins.gmail`: sandboxes of the providers' APIs (sends recorded, webhooks and
  statuses delivered back), mounted by the channel services when an account points at the sandbox;
* :mod:`~switchboard.standins.faults`: fault hooks that make a sandbox or the model fail on purpose;
* :mod:`~switchboard.standins.offline_server`: a scripted, OpenAI-compatible model server;
  :mod:`~switchboard.standins.offline_demo` its demo answers, :mod:`~switchboard.standins.offline_guard`
  the guard that keeps the offline model out of production.

Nothing in the channel-neutral core imports this package; the channel services, the CLI's
``simulate`` and the tests do.
"""
