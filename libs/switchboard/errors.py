"""Switchboard's exception tree: each error says who has to act.

``SwitchboardError`` is the root. Exceptions carry the ids they concern as attributes so logs and
handlers can report them without parsing messages.
"""

from __future__ import annotations

from typing import Any


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


def tool_error_result(
    error_type: str, message: str, *, retryable: bool = False, diagnostics: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    """The one shape a model sees for a failed tool call (errors go back as results: docs/architecture.md#the-tool-loop):
    ``{"error": {"type", "message", "retryable", "diagnostics"?}}``; ``diagnostics`` (per-field
    problems, ``[{"field", "problem"}]``) only when there are some."""
    body: dict[str, Any] = {"type": error_type, "message": message, "retryable": retryable}
    if diagnostics:
        body["diagnostics"] = diagnostics
    return {"error": body}


class ToolError(SwitchboardError):
    """A tool call failed in a way the model should see: returned to it as a result, never a crash.

    Raised by tool handlers (the MCP server's and the built-in ones) and by tool sources; the tool
    loop turns it into :meth:`as_result`.

    Attributes:
        message: what went wrong, for the model (never a stack trace).
        error_type: short class: ``missing_tenant``, ``forbidden``, ``invalid_arguments``, ``not_found``,
            ``conflict``, ``invalid_result``, ``timeout``, ``unavailable``, ``budget_exhausted``,
            ``untrusted_context``, ``tool_error``...
        retryable: the same call may succeed later (timeouts, 5xx, server down); validation and
            permission errors are not retryable.
        diagnostics: per-field problems for ``invalid_arguments`` (``[{"field", "problem"}]``).
    """

    def __init__(
        self,
        message: str,
        *,
        error_type: str = "tool_error",
        retryable: bool = False,
        diagnostics: list[dict[str, str]] | None = None,
    ) -> None:
        self.message = message
        self.error_type = error_type
        self.retryable = retryable
        self.diagnostics = diagnostics or []
        details = "; ".join(f"{d['field']}: {d['problem']}" for d in self.diagnostics)
        # str() carries the diagnostics too: whatever only shows the message still shows the fields
        super().__init__(f"{message} ({details})" if details else message)

    def as_result(self, *, max_message_chars: int = 1_000) -> dict[str, Any]:
        """:func:`tool_error_result` of this error (the message with its diagnostics spelled out)."""
        return tool_error_result(
            self.error_type,
            str(self)[:max_message_chars],
            retryable=self.retryable,
            diagnostics=self.diagnostics,
        )
