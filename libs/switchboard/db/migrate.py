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
from alembic.script.revision import ResolutionError
from alembic.util import CommandError

from switchboard.errors import SwitchboardError

__all__ = [
    "alembic_config",
    "upgrade",
    "downgrade",
    "head_revision",
    "revision",
    "include_object",
    "UnknownRevision",
]


def include_object(obj: object, name: str | None, type_: str, reflected: bool, compare_to: object) -> bool:
    """Alembic's ``include_object`` for autogenerate: everything but the tenants' partial HNSW indexes.

    Those (``TENANT_HNSW_INDEX_PREFIX`` + tenant id) are made and dropped at run time by the background
    job (:mod:`switchboard.knowledge.vector_index`), so a database has them and the models do not.
    """
    from switchboard.db.models.knowledge import TENANT_HNSW_INDEX_PREFIX

    return not (type_ == "index" and reflected and (name or "").startswith(TENANT_HNSW_INDEX_PREFIX))


class UnknownRevision(SwitchboardError):
    """``db upgrade|downgrade --revision`` names no migration (the CLI prints one line, exit 2)."""

    def __init__(self, revision: str) -> None:
        self.revision = revision
        script = ScriptDirectory(str(MIGRATIONS_DIR))
        known = [rev.revision for rev in script.walk_revisions()][::-1]
        super().__init__(
            f"no migration revision {revision!r}: use head, base, a relative step (+1, -1) or one of "
            f"{', '.join(known)}"
        )


def _resolvable(revision: str) -> None:
    """Raises UnknownRevision unless ``revision`` names a migration, ``head(s)``/``base`` or a relative step."""
    if revision in ("head", "heads", "base") or revision.lstrip("+-").isdigit():
        return
    script = ScriptDirectory(str(MIGRATIONS_DIR))
    target = revision.split("@")[-1].split("+")[0].split("-")[0] if "@" in revision else revision
    try:
        if script.get_revisions(target) == ():
            raise UnknownRevision(revision)
    except (CommandError, ResolutionError):
        raise UnknownRevision(revision) from None


MIGRATIONS_DIR = Path(__file__).with_name("migrations")


def alembic_config(url: str) -> Config:
    """An Alembic ``Config`` for this package's migrations against ``url``."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    """Migrate the database at ``url`` up to ``revision`` (default: the newest).

    Raises:
        UnknownRevision: ``revision`` names no migration (checked before connecting).
    """
    _resolvable(revision)
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str = "base") -> None:
    """Migrate down to ``revision`` (``base`` drops every table Switchboard created).

    Raises:
        UnknownRevision: ``revision`` names no migration.
    """
    _resolvable(revision)
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
