"""Database access: engine, sessions, tables, migrations and the tenant-scoped query helper."""

from switchboard.db.engine import create_engine, session_factory, session_scope, to_async_url
from switchboard.db.tenant_scope import TenantScope

__all__ = ["TenantScope", "create_engine", "session_factory", "session_scope", "to_async_url"]
