"""``python -m switchboard.cli``: the same as the ``switchboard`` command."""

from switchboard.cli import main

main()
