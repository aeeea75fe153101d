"""The ``switchboard`` command line in tests: Typer's runner with a base environment (the ``cli`` fixture)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from click.testing import Result
from typer.testing import CliRunner


@dataclass(frozen=True)
class Cli:
    """Runs ``switchboard`` commands in-process with ``env`` (plus per-call variables; ``None`` unsets one)."""

    env: dict[str, str | None] = field(default_factory=dict)

    def run(self, *args: str, input: str | None = None, **env: str | None) -> Result:
        """``switchboard ARGS...`` in this thread (for sync tests); ``input`` is typed on stdin."""
        from switchboard.cli import app

        return CliRunner().invoke(app, list(args), env={**self.env, **env}, input=input)

    async def arun(self, *args: str, input: str | None = None, **env: str | None) -> Result:
        """``switchboard ARGS...`` in a worker thread: commands run their own event loop (``asyncio.run``)."""
        return await asyncio.to_thread(self.run, *args, input=input, **env)
