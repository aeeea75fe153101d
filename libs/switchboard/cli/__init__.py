"""The ``switchboard`` command line (``[project.scripts] switchboard = "switchboard.cli:main"``).

* :mod:`.root`: the root command, its groups and :func:`main`;
* :mod:`.runner`: settings that find a running system (``DATA_DIR/run.json``), the database runner,
  the one-line error wrapper;
* the commands: :mod:`.system` (``run``, ``status``), :mod:`.db`, :mod:`.tenants`, :mod:`.tools`
  (``tools``, ``data``), :mod:`.kb`, :mod:`.agents`, :mod:`.keys` (``keys rotate``), :mod:`.queue` (``queue depth``), :mod:`.simulate`
  (``simulate turn``), :mod:`.users` (``users add|list|passwd|token``), :mod:`.conversations`
  (``conversations list|show``), :mod:`.evals` (``eval``, ``feedback issue-key``);
* channel packages add their own commands to ``channel`` and ``simulate`` when imported
  (:mod:`switchboard.channels.whatsapp.cli`: ``channel add-whatsapp``, ``simulate whatsapp``;
  :mod:`switchboard.channels.instagram.cli`: ``channel add-instagram``, ``simulate instagram``;
  :mod:`switchboard.channels.gmail.cli`: ``channel add-gmail``, ``simulate gmail``).
"""

import switchboard.channels.gmail.cli  # noqa: F401  (registers the Gmail commands)
import switchboard.channels.instagram.cli  # noqa: F401  (registers the Instagram commands)
import switchboard.channels.whatsapp.cli  # noqa: F401  (registers the WhatsApp commands)
from switchboard.cli import (  # noqa: F401  (register)
    agents,
    channels,
    conversations,
    db,
    evals,
    events,
    kb,
    keys,
    queue,
    settings,
    simulate,
    system,
    tenants,
    tools,
    users,
)
from switchboard.cli.root import app, main

__all__ = ["app", "main"]
