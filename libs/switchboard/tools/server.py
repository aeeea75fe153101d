"""The MCP tool server: business tools over Streamable HTTP, bearer-authenticated, tenant-scoped.

Each :class:`~switchboard.tools.contracts.ToolContract` becomes one MCP tool whose parameters are
the contract's input fields plus the injected ones (``tenant_id``, ``customer_id``,
``conversation_id``, ``trace_id``, ``idempotency_key``, ``tool_config``). The orchestrator hides the
injected ones from the model and fills them from the authenticated turn. On every call the server:

1. refuses to run without a valid ``tenant_id`` (``[missing_tenant]``; there is no default tenant),
   and before any query an argument holding text Postgres cannot store (a NUL, an unpaired
   surrogate: ``[invalid_arguments] <field>: ...``, never the database error it would cause);
2. verifies the signed per-turn ``capability`` (:mod:`switchboard.tools.capability`): valid
   signature, not expired, same tenant (and customer, conversation, trace id), the tool among its
   tools; otherwise ``[forbidden] Forbidden`` and a ``security_alerts`` row (``capability_rejected``).
   The service token alone reads nothing;
3. checks the tenant's ``mcp_tenant_tools`` row (fail closed: ``[forbidden] Forbidden`` and a
   ``security_alerts`` row);
4. validates the model's arguments against the input model (``[invalid_arguments]`` with fields);
5. uses only the tenant's *stored* tool configuration (``custom_config``): a caller-sent
   ``tool_config`` is ignored and logged (``caller_tool_config_ignored``);
6. runs the call's database work as the restricted role ``TOOLS_DB_ROLE`` with ``app.tenant_id`` set
   (:func:`switchboard.db.rls.enter_tenant_role`): Postgres row-level security shows it only this
   tenant's rows, whatever a query forgets;
7. for writes, requires an idempotency key and runs the mutation and its ``audit_logs`` row in one
   transaction, or records a ``pending_actions`` row when the policy (or the tenant's
   ``custom_config.needs_approval``) says a person must approve.

Callers authenticate with ``Authorization: Bearer <MCP_SERVICE_TOKEN>``; anything else gets 401.
"""

from __future__ import annotations

import hmac
import inspect
import json
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import FastAPI
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError as SdkToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import ToolAnnotations
from pydantic import BaseModel, ValidationError
from pydantic import Field as PydanticField
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession
from starlette.applications import Starlette

from switchboard import __version__
from switchboard.body_limit import BodyLimitMiddleware
from switchboard.db.engine import session_scope
from switchboard.db.models import McpTenantTool, Tenant
from switchboard.db.rls import enter_tenant_role
from switchboard.db.tenant_scope import TenantScope
from switchboard.docs_ui import mount_local_docs
from switchboard.errors import ToolError
from switchboard.health import health_router
from switchboard.observability import configure_logging, get_logger
from switchboard.observability.metrics import mount_metrics
from switchboard.observability.tracing import configure_tracing, instrument_app
from switchboard.runtime.resources import open_resources
from switchboard.settings import Settings
from switchboard.tools.business import BUSINESS_TOOLS, request_approval
from switchboard.tools.capability import CapabilityRejected, ToolCapability, verify_capability
from switchboard.tools.contracts import (
    FORBIDDEN_MESSAGE,
    INJECTED_PARAMS,
    UNSTORABLE_PROBLEM,
    ToolCallContext,
    ToolContract,
    error_text,
    unstorable_field,
)
from switchboard.tools.receipts import record_security_alert

__all__ = ["ToolServer", "BearerAuthMiddleware", "create_tools_app", "MCP_PATH", "SSE_PATH"]

log = get_logger(__name__)

MCP_PATH = "/mcp"
"""Where the Streamable HTTP endpoint is served."""
SSE_PATH = "/sse"
SSE_MESSAGES_PATH = "/messages/"
"""The legacy HTTP+SSE transport (deprecated by the MCP spec, still served for older clients)."""

_INJECTED_SIGNATURE = [
    # optional in the schema so that a call without it reaches run() and gets the clear refusal
    inspect.Parameter("tenant_id", inspect.Parameter.KEYWORD_ONLY, annotation=str | None, default=None),
    inspect.Parameter("customer_id", inspect.Parameter.KEYWORD_ONLY, annotation=str | None, default=None),
    inspect.Parameter("conversation_id", inspect.Parameter.KEYWORD_ONLY, annotation=str | None, default=None),
    inspect.Parameter("trace_id", inspect.Parameter.KEYWORD_ONLY, annotation=str | None, default=None),
    inspect.Parameter("idempotency_key", inspect.Parameter.KEYWORD_ONLY, annotation=str | None, default=None),
    inspect.Parameter(
        "tool_config", inspect.Parameter.KEYWORD_ONLY, annotation=dict[str, Any] | None, default=None
    ),
    inspect.Parameter("capability", inspect.Parameter.KEYWORD_ONLY, annotation=str | None, default=None),
]
assert [p.name for p in _INJECTED_SIGNATURE] == list(INJECTED_PARAMS)


class ToolServer:
    """An :class:`MCPServer` with Switchboard's contracts enforced around every tool.

    Args:
        contracts: the tools to offer (default: :data:`~switchboard.tools.business.BUSINESS_TOOLS`).
        name: the MCP server name.

    ``sessions`` (and ``settings``) are set by the app's lifespan before a tool is called.
    """

    def __init__(
        self, contracts: Iterable[ToolContract] = BUSINESS_TOOLS, *, name: str = "switchboard-tools"
    ):
        self.mcp = MCPServer(name=name, version=__version__)
        self.sessions: async_sessionmaker[AsyncSession] | None = None
        self.settings: Settings | None = None
        self.contracts: dict[str, ToolContract] = {}
        for contract in contracts:
            self.register(contract)

    def register(self, contract: ToolContract) -> None:
        """Offer one more tool (its MCP schema: input fields + injected parameters)."""
        self.contracts[contract.name] = contract

        async def call(**kwargs: Any) -> Any:
            injected = {name: kwargs.pop(name, None) for name in INJECTED_PARAMS}
            return await self.run(contract, kwargs, injected)

        params = []
        for field_name, info in contract.input_model.model_fields.items():
            annotation = Annotated[
                info.annotation, *info.metadata, PydanticField(description=info.description)
            ]
            default = (
                inspect.Parameter.empty if info.is_required() else info.get_default(call_default_factory=True)
            )
            params.append(
                inspect.Parameter(
                    field_name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default
                )
            )
        call.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [*params, *_INJECTED_SIGNATURE], return_annotation=contract.result_model
        )
        call.__name__ = contract.name
        self.mcp.add_tool(
            call,
            name=contract.name,
            description=contract.description,
            annotations=ToolAnnotations(
                read_only_hint=contract.policy.kind == "read",
                destructive_hint=False,
                idempotent_hint=True,
                open_world_hint=False,
            ),
            meta=contract.meta(),
            structured_output=True,
        )

    async def run(
        self, contract: ToolContract, args: dict[str, Any], injected: Mapping[str, Any]
    ) -> BaseModel:
        """Enforce the contract around one call and run the handler.

        Raises:
            SdkToolError: with ``"[error_type] message"`` text (see :func:`~switchboard.tools.contracts.error_text`).
        """
        tool_log = log.bind(tool_name=contract.name, trace_id=injected.get("trace_id"))
        tenant_id = _uuid_or_none(injected.get("tenant_id"))
        if tenant_id is None:
            tool_log.warning("tool_refused_missing_tenant")
            raise SdkToolError(
                error_text("missing_tenant", "tenant_id is required; this server never assumes a tenant")
            )
        tool_log = tool_log.bind(tenant_id=str(tenant_id))
        # text Postgres cannot store never reaches a query (it would read as a database outage)
        unstorable = unstorable_field(
            {**args, **{k: injected.get(k) for k in ("trace_id", "idempotency_key")}}
        )
        if unstorable is not None:
            tool_log.warning("tool_refused_unstorable_argument", field=unstorable)
            raise SdkToolError(error_text("invalid_arguments", f"{unstorable}: {UNSTORABLE_PROBLEM}"))
        if self.sessions is None or self.settings is None:
            raise SdkToolError(error_text("unavailable", "the tool server is starting; try again"))
        try:
            _covers(
                verify_capability(self.settings.secret("tool_capability_key"), injected.get("capability")),
                contract.name,
                injected,
                tenant_id,
            )
        except CapabilityRejected as exc:
            await self._alert(
                tenant_id, contract.name, injected, kind="capability_rejected", reason=exc.reason
            )
            tool_log.warning("tool_capability_rejected", reason=exc.reason)
            raise SdkToolError(error_text("forbidden", FORBIDDEN_MESSAGE)) from None
        if injected.get("tool_config") is not None:
            tool_log.warning("caller_tool_config_ignored")  # only the stored configuration counts
        key = injected.get("idempotency_key")
        is_write = contract.policy.kind == "write"
        try:
            async with session_scope(self.sessions) as session:
                if self.settings.tools_db_role:  # Postgres row-level security: this tenant's rows only
                    await enter_tenant_role(session, tenant_id, role=self.settings.tools_db_role)
                if await session.get(Tenant, tenant_id) is None:
                    raise ToolError("unknown tenant", error_type="missing_tenant")
                assignment = await TenantScope(session, tenant_id).first(
                    McpTenantTool, McpTenantTool.tool_name == contract.name
                )
                if assignment is None or not assignment.enabled:
                    raise _Denied
                try:  # after the permission check: a forbidden tool reveals nothing, not even its fields
                    parsed = contract.input_model.model_validate(args)
                except ValidationError as exc:
                    raise ToolError(_describe(exc), error_type="invalid_arguments") from None
                if is_write and not key:
                    raise ToolError("writes need an idempotency key", error_type="missing_idempotency_key")
                ctx = ToolCallContext(
                    tenant_id=tenant_id,
                    customer_id=_uuid_or_none(injected.get("customer_id")),
                    conversation_id=_uuid_or_none(injected.get("conversation_id")),
                    trace_id=injected.get("trace_id"),
                    idempotency_key=key if is_write else None,
                    tool_config=dict(assignment.custom_config or {}),
                    session=session,
                    settings=self.settings,
                )
                if is_write and (contract.policy.needs_approval or ctx.tool_config.get("needs_approval")):
                    action = await request_approval(ctx, contract.name, parsed)
                    result = contract.result_model.model_validate(
                        {
                            "status": "pending_approval",
                            "message": "A person must approve this first; tell the customer we will confirm.",
                            "pending_action_id": str(action.id),
                        }
                    )
                else:
                    result = await contract.handler(ctx, parsed)
                result = _checked_result(contract, result)  # inside the transaction: a bad result rolls back
        except _Denied:
            await self._alert(tenant_id, contract.name, injected)
            tool_log.warning("tool_forbidden")
            raise SdkToolError(error_text("forbidden", FORBIDDEN_MESSAGE)) from None
        except ToolError as exc:
            tool_log.info("tool_failed", error_type=exc.error_type)
            raise SdkToolError(error_text(exc.error_type, str(exc))) from None
        except IntegrityError:
            tool_log.warning("tool_conflict")
            raise SdkToolError(error_text("conflict", "a concurrent change conflicted; try again")) from None
        except SQLAlchemyError as exc:
            tool_log.error("tool_database_error", error=type(exc).__name__)
            raise SdkToolError(error_text("unavailable", "the database is unavailable; try again")) from None
        tool_log.info("tool_ran", kind=contract.policy.kind)
        return result

    async def _alert(
        self,
        tenant_id: uuid.UUID,
        tool_name: str,
        injected: Mapping[str, Any],
        *,
        kind: str = "tool_forbidden",
        reason: str | None = None,
    ) -> None:
        assert self.sessions is not None
        details = {
            "tool_name": tool_name,
            "conversation_id": injected.get("conversation_id"),
            "where": "mcp_server",
        }
        if reason:
            details["reason"] = reason
        try:
            await record_security_alert(
                self.sessions,
                tenant_id=tenant_id,
                kind=kind,
                details=details,
                trace_id=injected.get("trace_id"),
            )
        except SQLAlchemyError as exc:  # e.g. a forged capability naming a tenant that does not exist
            log.warning("security_alert_not_recorded", kind=kind, error=type(exc).__name__)


def _covers(
    capability: ToolCapability, tool_name: str, injected: Mapping[str, Any], tenant_id: uuid.UUID
) -> None:
    """Check that ``capability`` covers this call.

    Raises:
        CapabilityRejected: another tenant (``tenant_mismatch``), customer, conversation or trace id
            than the call names, or a tool it does not list (``tool_not_granted``).
    """
    if capability.tenant_id != tenant_id:
        raise CapabilityRejected("tenant_mismatch")
    for name, granted in (
        ("customer_id", capability.customer_id),
        ("conversation_id", capability.conversation_id),
    ):
        given = _uuid_or_none(injected.get(name))
        if given != granted:
            raise CapabilityRejected(f"{name.removesuffix('_id')}_mismatch")
    if (injected.get("trace_id") or None) != capability.trace_id:
        raise CapabilityRejected("trace_mismatch")
    if tool_name not in capability.tools:
        raise CapabilityRejected("tool_not_granted")


class _Denied(Exception):
    """Internal: the tenant may not call this tool."""


def _checked_result(contract: ToolContract, result: Any) -> BaseModel:
    """The handler's result as ``contract.result_model``; any other shape is a controlled failure."""
    if isinstance(result, contract.result_model):
        return result
    try:
        data = result.model_dump() if isinstance(result, BaseModel) else result
        return contract.result_model.model_validate(data)
    except ValidationError:
        log.error("tool_result_shape_violation", tool_name=contract.name, got=type(result).__name__)
        raise ToolError("the tool returned an unexpected result", error_type="invalid_result") from None


def _uuid_or_none(value: Any) -> uuid.UUID | None:
    if value in (None, ""):
        return None
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


def _describe(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '(arguments)'}: {err['msg']}" for err in exc.errors()
    )


class BearerAuthMiddleware:
    """ASGI middleware: requests under ``protected_prefixes`` need ``Authorization: Bearer <token>``.

    Pure ASGI (no response buffering), so Streamable HTTP's event streams pass through untouched.
    Comparison is constant-time.
    """

    def __init__(self, app: Any, *, token: Callable[[], str], protected_prefixes: tuple[str, ...]) -> None:
        self.app = app
        self.token = token
        self.protected_prefixes = protected_prefixes

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith(self.protected_prefixes):
            headers = dict(scope.get("headers") or [])
            supplied = headers.get(b"authorization", b"")
            expected = b"Bearer " + self.token().encode()
            if not hmac.compare_digest(supplied, expected):
                log.warning(
                    "mcp_request_rejected", reason="missing or wrong bearer token", path=scope["path"]
                )
                body = json.dumps({"detail": "missing or invalid bearer token (mcp)"}).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b"Bearer"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def create_tools_app(settings: Settings, *, server: ToolServer | None = None) -> FastAPI:
    """The ``mcp_tools`` service: ``GET /healthz``, MCP Streamable HTTP at ``/mcp`` and legacy SSE at
    ``/sse`` (+ ``/messages/``), both behind the bearer token.

    Args:
        settings: process settings (``DATABASE_URL`` required; the token is
            ``settings.secret("mcp_service_token")``).
        server: the tool server (tests add tools to one); default: every business tool.
    """
    configure_logging(
        service="mcp_tools",
        level=settings.log_level,
        fmt=settings.log_format,
        unmask_pii=settings.log_unmask_pii,
    )
    settings.require_secrets()  # GENERATE_SECRETS=false (containers): refuse to start without them
    configure_tracing(service="mcp_tools")
    server = server or ToolServer()
    token = settings.secret("mcp_service_token")
    # DNS-rebinding protection is off: every request must carry the bearer token anyway, and the
    # service is reached by container host names in production.
    no_rebinding_check = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    mcp_app = server.mcp.streamable_http_app(
        streamable_http_path=MCP_PATH, transport_security=no_rebinding_check
    )
    sse_app = server.mcp.sse_app(
        sse_path=SSE_PATH, message_path=SSE_MESSAGES_PATH, transport_security=no_rebinding_check
    )
    transports = Starlette(routes=[*mcp_app.routes, *sse_app.routes])

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with open_resources(settings, with_redis=False) as resources:
            app.state.resources = resources
            server.sessions = resources.sessions
            server.settings = settings
            async with server.mcp.session_manager.run():
                log.info("service ready", version=__version__, tools=sorted(server.contracts))
                yield
        log.info("service stopped")

    app = FastAPI(
        title="switchboard-mcp_tools",
        version=__version__,
        description="Tenant business tools over MCP (Streamable HTTP at /mcp, bearer token).",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    mount_local_docs(app)  # /docs from the vendored Swagger UI (before the catch-all MCP mount)
    app.state.settings = settings
    app.state.tool_server = server
    app.include_router(health_router("mcp_tools"))
    mount_metrics(app)  # before the catch-all mount below
    instrument_app(app)  # a tool call's traceparent (sent by McpToolSource) parents the server span
    protected = (MCP_PATH, SSE_PATH, SSE_MESSAGES_PATH.rstrip("/"))
    app.mount("/", BearerAuthMiddleware(transports, token=lambda: token, protected_prefixes=protected))
    app.add_middleware(
        BodyLimitMiddleware, default_bytes=settings.max_body_bytes
    )  # tool calls are small JSON
    return app
