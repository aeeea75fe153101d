"""Switchboard's exception tree: each error says who has to act.

``SwitchboardError`` is the root. Exceptions carry the ids they concern as attributes so logs and
handlers can report them without parsing messages.
"""

from __future__ import annotations


class SwitchboardError(Exception):
    """Root of every error Switchboard raises on purpose."""


class SettingsError(SwitchboardError):
    """A setting is missing or malformed; the operator fixes the environment or ``.env``.

    Attributes:
        setting: the environment variable name, e.g. ``DATABASE_URL``.
    """

    def __init__(self, setting: str, problem: str) -> None:
        self.setting = setting
        self.problem = problem
        super().__init__(f"setting {setting}: {problem}")


class EmbeddedServerError(SwitchboardError):
    """An embedded PostgreSQL or Redis could not be started or stopped (see its log file)."""

    def __init__(self, server: str, problem: str, log_path: str | None = None) -> None:
        self.server = server
        self.log_path = log_path
        detail = f" (log: {log_path})" if log_path else ""
        super().__init__(f"embedded {server}: {problem}{detail}")


class AlreadyRunning(SwitchboardError):
    """Another ``switchboard run`` already owns this ``DATA_DIR``."""

    def __init__(self, data_dir: str, pid: int | None) -> None:
        self.data_dir = data_dir
        self.pid = pid
        super().__init__(f"switchboard is already running on DATA_DIR={data_dir} (pid {pid}); stop it first")


class TenantNotFound(SwitchboardError):
    """No tenant with that id or slug exists."""

    def __init__(self, tenant: str) -> None:
        self.tenant = tenant
        super().__init__(f"tenant not found: {tenant}")


class CrossTenantAccess(SwitchboardError):
    """A row of one tenant was about to be read or written under another tenant's scope.

    Raised by the tenant-scoped query helper; it is a programming error, never a user error.
    """

    def __init__(self, expected_tenant_id: str, found_tenant_id: str, table: str) -> None:
        self.expected_tenant_id = expected_tenant_id
        self.found_tenant_id = found_tenant_id
        self.table = table
        super().__init__(
            f"row of tenant {found_tenant_id} in {table} accessed under tenant {expected_tenant_id}"
        )
