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

The command modules load when a command runs (:func:`switchboard.cli.root.load_commands`):
``switchboard run`` imports only :mod:`.system`. ``switchboard.cli.app`` (PEP 562) loads every one first,
so code and tests that take the Typer app see the whole tree.
"""

from __future__ import annotations

from typing import Any

from switchboard.cli.root import main

__all__ = ["app", "main"]


def __getattr__(name: str) -> Any:
    """``app``: the root Typer app with every command registered; AttributeError for anything else."""
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from switchboard.cli import root

    root.load_commands()
    return root.app
