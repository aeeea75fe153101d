"""Alembic migrations run programmatically (``switchboard db upgrade`` and ``switchboard run``).

These functions are synchronous (Alembic's env runs its own event loop): from async code call them
with ``await asyncio.to_thread(upgrade, url)``.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

__all__ = ["alembic_config", "upgrade", "downgrade", "head_revision", "revision"]

MIGRATIONS_DIR = Path(__file__).with_name("migrations")


def alembic_config(url: str) -> Config:
    """An Alembic ``Config`` for this package's migrations against ``url``."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    """Migrate the database at ``url`` up to ``revision`` (default: the newest)."""
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str = "base") -> None:
    """Migrate down to ``revision`` (``base`` drops every table Switchboard created)."""
    command.downgrade(alembic_config(url), revision)


def revision(url: str, message: str, *, autogenerate: bool = True) -> None:
    """Write a new migration file (developers: ``switchboard db revision -m "..."``)."""
    command.revision(alembic_config(url), message=message, autogenerate=autogenerate)


def head_revision() -> str:
    """The newest revision id among the migration files."""
    head = ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head()
    assert head is not None
    return head


def current_revision_sync(connection) -> str | None:  # type: ignore[no-untyped-def]
    """The revision a sync connection's database is at (use with ``AsyncConnection.run_sync``)."""
    return MigrationContext.configure(connection).get_current_revision()
