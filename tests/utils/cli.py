"""The ``switchboard`` command line in tests: Typer's runner with a base environment (the ``cli`` fixture)."""

from __future__ import annotations

import asyncio
import gc
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

        # Collect what earlier tests of this process left behind (a pending task of a closed event loop,
        # such as LiteLLM's logging worker, logs "Task was destroyed but it is pending!" when collected)
        # now, not while the command writes the stderr a test reads.
        gc.collect()
        return CliRunner().invoke(app, list(args), env={**self.env, **env}, input=input)

    async def arun(self, *args: str, input: str | None = None, **env: str | None) -> Result:
        """``switchboard ARGS...`` in a worker thread: commands run their own event loop (``asyncio.run``)."""
        return await asyncio.to_thread(self.run, *args, input=input, **env)
