"""The orchestrator's side of MCP: a tool source that discovers the tool server's tools at runtime,
shows each tenant only its toolbox, and enforces the contracts on every call (docs/decisions/tenant-injected-into-tools.md).

:class:`McpToolSource` has the tool loop's tool-source shape: ``definitions(ctx)`` gives
OpenAI-format tool definitions, ``call(name, arguments, ctx)`` runs one call for the turn's
:class:`~switchboard.tools.context.ToolContext` and returns a
:class:`~switchboard.tools.context.ToolOutput`, raising :class:`McpToolError` (a
:class:`~switchboard.errors.ToolError`) for anything the model should see as an error.

What it guarantees, in order, for every call:

1. the tool was discovered and is enabled for the tenant in ``mcp_tenant_tools`` (otherwise a
   generic ``Forbidden`` and a ``security_alerts`` row);
2. injected parameters (``tenant_id``, ``customer_id``, ``tool_config``...) come from the turn,
   overwriting anything the model sent under those names;
3. writes are refused while untrusted external text is in the context, and beyond the per-turn
   mutation budget (default 1: "a person must review");
4. arguments are validated against the schema the model saw (field diagnostics back to the model);
5. the call runs under a timeout; server errors are classified ``retryable`` or not; a result of
   the wrong shape becomes a controlled ``invalid_result`` error;
6. a ``tool_receipts`` row is written, whatever happened.

Discovery (``list_tools()``) is cached for ``refresh_interval_s``; a server that is down or slow
leaves the turn with no MCP tools (the built-ins still work) and a logged warning.

Sessions are pooled (:class:`_SessionPool`): an MCP session (``initialize`` + ``notifications/initialized``
+ a closing ``DELETE``: three extra HTTP exchanges) is opened once and reused by later calls and turns
(up to ``pool_size`` sessions, concurrent calls share them). Nothing tenant-specific lives in a
session: each call carries its own signed capability and injected parameters. A session that fails
is closed; a call that failed on a *reused* session (the server restarted, or reaped it idle) is
tried once more on a new one (a write carries its idempotency key, so the server answers a repeat
from its receipt).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import time
import uuid
import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

import httpx2
from jsonschema import Draft202012Validator
from sqlalchemy import func
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import McpTenantTool, ToolReceipt
from switchboard.db.tenant_scope import TenantScope
from switchboard.errors import ToolError
from switchboard.observability import get_logger, tracing
from switchboard.settings import Settings
from switchboard.tenant_settings import load_tenant_settings
from switchboard.tools.capability import DEFAULT_TTL_S, sign_capability
from switchboard.tools.context import UNTRUSTED_REFUSAL, ToolContext, ToolOutput, idempotency_key_for, offered
from switchboard.tools.contracts import (
    CONTRACT_META_KEY,
    FORBIDDEN_MESSAGE,
    INJECTED_PARAMS,
    UNSTORABLE_PROBLEM,
    ToolPolicy,
    parse_error_text,
    unstorable_field,
)
from switchboard.tools.receipts import Outcome, record_receipt, record_security_alert
from switchboard.warming import start_import

if TYPE_CHECKING:  # the SDK (~1 s of CPU, its server half included) loads on first use: start_mcp_import
    from mcp import Client

__all__ = [
    "start_mcp_import",
    "DEFAULT_POOL_SIZE",
    "DiscoveredTool",
    "McpToolSource",
    "McpToolError",
    "strip_injected",
    "is_untrusted",
]

log = get_logger(__name__)


def _import_mcp() -> tuple[ModuleType, ModuleType]:
    """``(mcp, mcp.client.streamable_http)``, imported on first call."""
    import mcp
    import mcp.client.streamable_http

    return mcp, mcp.client.streamable_http


def start_mcp_import() -> concurrent.futures.Future[Any]:
    """Import the MCP SDK in a daemon thread ``mcp-import``, once per process: the orchestrator's
    warm-up (its requests wait for it: :class:`switchboard.service_app.ServiceApp`), so neither its
    ``/healthz`` nor a turn on its event loop waits for the ~1 s import."""
    return start_import("mcp", _import_mcp)


LOOP_TIMEOUT_SHARE = 0.95
"""Share of the tool loop's per-call timeout this source uses, so its own timeout fires first."""

# Server error types worth retrying later (the rest: the model must change something or give up).
_RETRYABLE = {"unavailable", "conflict", "timeout"}
DEFAULT_POOL_SIZE = 4
"""Open MCP sessions a source keeps at most (each takes concurrent calls; more are opened only while
every open one has a call in flight)."""
SESSION_MAX_IDLE_S = 300.0
"""A pooled session unused this long is closed rather than reused (the server reaps idle sessions
after 30 minutes: ``StreamableHTTPSessionManager.session_idle_timeout``)."""


class SessionLost(Exception):
    """The pooled MCP session ended (its transport failed) while a call was waiting on it."""


class _PooledSession:
    """One MCP client session, entered and exited by its own task (anyio's cancel scopes must be left
    by the task that entered them), used by any number of calls from other tasks."""

    def __init__(self, open_client: Callable[[], Client]) -> None:
        self._open = open_client
        self.ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()
        self.in_flight = 0
        self.uses = 0
        self.retired = False
        self.last_used = time.monotonic()
        self.task = asyncio.create_task(self._own(), name="mcp-session")

    async def _own(self) -> None:
        try:
            async with self._open() as client:
                self.ready.set_result(client)
                await self._stop.wait()
        except Exception as exc:  # connect, handshake or transport failure: the session is gone
            if not self.ready.done():
                self.ready.set_exception(exc)
            else:
                log.info("mcp_session_closed_on_error", error=_describe_exception(exc))
        finally:
            self.retired = True
            if not self.ready.done():
                self.ready.cancel()

    def retire(self) -> None:
        """Take no new calls; close once the calls in flight are done."""
        self.retired = True
        if self.in_flight == 0:
            self._stop.set()

    def release(self) -> None:
        self.in_flight -= 1
        self.last_used = time.monotonic()
        if self.retired and self.in_flight == 0:
            self._stop.set()

    async def run(self, request: Awaitable[Any]) -> Any:
        """Await ``request`` (a call on this session's client) unless the session ends first.

        Raises:
            SessionLost: the session's transport ended before the answer came.
        """
        call = asyncio.ensure_future(request)
        try:
            done, _ = await asyncio.wait({call, self.task}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            call.cancel()
            raise
        if call not in done:
            call.cancel()
            raise SessionLost("the MCP session ended during the call")
        return call.result()


class _SessionPool:
    """Up to ``size`` open MCP sessions shared by every call of a source (module docstring)."""

    def __init__(self, open_client: Callable[[], Client], *, size: int, max_idle_s: float) -> None:
        self._open = open_client
        self.size = max(1, size)
        self.max_idle_s = max_idle_s
        self._sessions: list[_PooledSession] = []

    async def acquire(self) -> tuple[_PooledSession, Client]:
        """A session with the fewest calls in flight (a new one while all are busy and there is room).

        Raises:
            Exception: opening a new session failed (connect, handshake).
        """
        now = time.monotonic()
        for pooled in list(self._sessions):
            if pooled.retired or (pooled.in_flight == 0 and now - pooled.last_used > self.max_idle_s):
                pooled.retire()
                self._sessions.remove(pooled)
        best = min(self._sessions, key=lambda p: p.in_flight, default=None)
        if best is None or (best.in_flight > 0 and len(self._sessions) < self.size):
            best = _PooledSession(self._open)
            self._sessions.append(best)
        best.in_flight += 1
        try:
            client = await asyncio.shield(best.ready)
        except BaseException:
            best.release()
            if best.ready.done():  # it failed to open (not merely our wait cancelled): drop it
                best.retire()
                if best in self._sessions:
                    self._sessions.remove(best)
            raise
        best.uses += 1
        return best, client

    async def aclose(self) -> None:
        """Close every session (waits for their closing ``DELETE``, a few seconds at most)."""
        sessions, self._sessions = self._sessions, []
        for pooled in sessions:
            pooled.retired = True
            pooled._stop.set()
        if sessions:
            await asyncio.wait([p.task for p in sessions], timeout=5.0)


class McpToolError(ToolError):
    """A failed MCP call as the tool loop reports it to the model (``error_type``, ``retryable``,
    ``diagnostics``: per-field problems for ``invalid_arguments``, also spelled out in the message)."""

    @classmethod
    def of(cls, failure: ToolError) -> McpToolError:
        return cls(
            failure.message,
            error_type=failure.error_type,
            retryable=failure.retryable,
            diagnostics=failure.diagnostics,
        )


@dataclass(frozen=True, kw_only=True)
class DiscoveredTool:
    """One tool as listed by the server, with its contract and the schema the model may see."""

    name: str
    description: str
    version: str
    policy: ToolPolicy
    model_schema: dict[str, Any]
    """Input schema with every injected parameter removed from ``properties`` and ``required``."""
    output_schema: dict[str, Any] | None
    validator: Draft202012Validator = field(repr=False)

    def definition(self) -> dict[str, Any]:
        """OpenAI-format function definition."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.model_schema},
        }


def strip_injected(schema: Mapping[str, Any], injected: tuple[str, ...] = INJECTED_PARAMS) -> dict[str, Any]:
    """A copy of a JSON schema without the injected parameters in ``properties`` and ``required``.

    Unknown properties are refused (``additionalProperties: false``) so a model's stray argument is
    reported back instead of silently passed on.
    """
    out = copy.deepcopy(dict(schema))
    out["properties"] = {k: v for k, v in (out.get("properties") or {}).items() if k not in injected}
    required = [name for name in out.get("required") or [] if name not in injected]
    if required:
        out["required"] = required
    else:
        out.pop("required", None)
    out["additionalProperties"] = False
    out.pop("title", None)
    return out


class McpToolSource:
    """MCP tools as a tool source for the tool loop.

    Args:
        url: the MCP endpoint (``http://host:port/mcp``).
        token: bearer token (``settings.secret("mcp_service_token")``).
        capability_key: signs each call's per-turn capability (``settings.secret("tool_capability_key")``,
            the tool server's key; :mod:`switchboard.tools.capability`).
        capability_ttl_s: lifetime of a capability (seconds).
        sessions: database sessions (toolbox, receipts, alerts, budget).
        refresh_interval_s: how long a successful ``list_tools()`` is reused.
        retry_after_failure_s: how long a failed discovery is not retried (turns meanwhile get no MCP tools);
            at most ``refresh_interval_s``.
        discovery_timeout_s: budget of one ``list_tools()`` (connect included).
        call_timeout_s: budget of one tool call (default 60 s).
        mutation_budget: successful writes allowed per turn (default: 1).
        pool_size: MCP sessions kept open and reused across calls and turns (:data:`DEFAULT_POOL_SIZE`).
    """

    records_receipts = True
    """This source writes its own (fuller) ``tool_receipts`` rows; the turn does not add another."""

    def __init__(
        self,
        *,
        url: str,
        token: str,
        capability_key: str,
        sessions: async_sessionmaker[AsyncSession],
        capability_ttl_s: float = DEFAULT_TTL_S,
        refresh_interval_s: float = 60.0,
        retry_after_failure_s: float = 10.0,
        discovery_timeout_s: float = 5.0,
        call_timeout_s: float = 60.0,
        mutation_budget: int = 1,
        pool_size: int = DEFAULT_POOL_SIZE,
    ) -> None:
        self.url = url
        self._token = token
        self._capability_key = capability_key
        self.capability_ttl_s = capability_ttl_s
        self.sessions = sessions
        self.refresh_interval_s = refresh_interval_s
        # a failure is never kept longer than a success would be
        self.retry_after_failure_s = min(retry_after_failure_s, refresh_interval_s)
        self.discovery_timeout_s = discovery_timeout_s
        self.call_timeout_s = call_timeout_s
        self.mutation_budget = mutation_budget
        self._tools: dict[str, DiscoveredTool] = {}
        self._fresh_until = 0.0
        self._lock = asyncio.Lock()
        self._http: httpx2.AsyncClient | None = None
        self._pool = _SessionPool(self._client, size=pool_size, max_idle_s=SESSION_MAX_IDLE_S)
        self._turn_locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    @classmethod
    def from_settings(cls, settings: Settings, sessions: async_sessionmaker[AsyncSession]) -> McpToolSource:
        """The tool source for this process: ``settings.mcp_tools_url`` with the MCP service token."""
        return cls(
            url=settings.mcp_tools_url,
            token=settings.secret("mcp_service_token"),
            capability_key=settings.secret("tool_capability_key"),
            sessions=sessions,
            refresh_interval_s=settings.mcp_discovery_refresh_s,
            discovery_timeout_s=settings.mcp_discovery_timeout_s,
        )

    # --- discovery -------------------------------------------------------------------------------
    def _client(self) -> Client:
        """A new MCP client session over the source's shared HTTP connection pool (calls pass their own
        read timeout; the pool keeps the session open)."""
        if self._http is None:
            self._http = httpx2.AsyncClient(
                headers={"Authorization": f"Bearer {self._token}"},
                timeout=httpx2.Timeout(self.call_timeout_s, connect=min(self.call_timeout_s, 5.0)),
                # W3C traceparent of the tool call: the tool server's spans join the turn's trace
                event_hooks={"request": [_propagate_trace]},
            )
        mcp, streamable_http = _import_mcp()
        return mcp.Client(
            streamable_http.streamable_http_client(self.url, http_client=self._http),
            read_timeout_seconds=self.call_timeout_s,
            cache=None,
        )

    async def _request(self, send: Callable[[Client], Awaitable[Any]]) -> Any:
        """``send(client)`` on a pooled session; once more on a new session when a reused one failed.

        A result the client refused (output schema) is not repeated: the server answered.

        Raises:
            Exception: the transport's or the client's error (the session is then closed).
        """
        for attempt in (1, 2):
            pooled, client = await self._pool.acquire()
            reused = pooled.uses > 1
            try:
                return await pooled.run(send(client))
            except Exception as exc:
                answered = "output schema" in str(exc) or "structured content" in str(exc)
                if not answered:
                    pooled.retire()
                if answered or not reused or attempt == 2:
                    raise
                log.info("mcp_session_stale_retry", error=_describe_exception(exc))
            except BaseException:  # a timeout (cancelled): the late answer must not reach another call
                pooled.retire()
                raise
            finally:
                pooled.release()
        raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
        """Close the pooled MCP sessions and the HTTP connection pool (at process shutdown)."""
        await self._pool.aclose()
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def discover(self, *, force: bool = False) -> dict[str, DiscoveredTool]:
        """The server's tools, from cache when fresh. Never raises: a failure yields ``{}`` and a warning."""
        if not force and time.monotonic() < self._fresh_until:
            return self._tools
        async with self._lock:
            if not force and time.monotonic() < self._fresh_until:
                return self._tools
            started = time.monotonic()
            try:
                async with asyncio.timeout(self.discovery_timeout_s):
                    listed = (await self._request(lambda client: client.list_tools())).tools
                self._tools = {tool.name: _discovered(tool) for tool in listed}
                self._fresh_until = time.monotonic() + self.refresh_interval_s
                log.info(
                    "mcp_tools_discovered",
                    count=len(self._tools),
                    duration_ms=round((time.monotonic() - started) * 1000, 1),
                )
            except Exception as exc:  # any transport/protocol failure: log and carry on without MCP tools
                self._tools = {}
                self._fresh_until = time.monotonic() + self.retry_after_failure_s
                log.warning(
                    "mcp_discovery_failed: turns use built-in tools only",
                    url=self.url,
                    error=_describe_exception(exc),
                    retry_in_s=self.retry_after_failure_s,
                )
            return self._tools

    def knows(self, name: str) -> bool:
        """Whether the last discovery listed ``name`` (the loop then lets this source refuse a call to a
        tool the tenant has not enabled, with ``Forbidden`` and a security alert)."""
        return name in self._tools

    async def toolbox(self, tenant_id: uuid.UUID) -> dict[str, McpTenantTool]:
        """The tenant's enabled tool assignments, by tool name."""
        async with self.sessions() as session:
            rows = await TenantScope(session, tenant_id).all(McpTenantTool, col(McpTenantTool.enabled))
        return {row.tool_name: row for row in rows}

    async def definitions(self, ctx: ToolContext) -> list[dict[str, Any]]:
        """What the model may call this turn: discovered ∩ enabled for the tenant, reads only while
        untrusted text is in the context. Injected parameters are not in the schemas."""
        tools = await self.discover()
        if not tools:
            return []
        enabled = await self.toolbox(ctx.tenant_id)
        return [
            tool.definition()
            for name, tool in tools.items()
            if name in enabled and offered(ctx, tool.policy.kind)
        ]

    # --- calls -----------------------------------------------------------------------------------
    async def call(self, name: str, arguments: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        """Run one MCP tool call for the turn ``ctx`` with every contract check.

        Raises:
            McpToolError: the model sees ``error_type``, the message and whether it is ``retryable``.
        """
        started = time.monotonic()
        call_log = log.bind(
            tenant_id=str(ctx.tenant_id),
            conversation_id=str(ctx.conversation_id),
            trace_id=ctx.trace_id,
            tool_name=name,
        )
        model_args = dict(arguments)
        overridden = sorted(k for k in model_args if k in INJECTED_PARAMS)
        for key in overridden:
            model_args.pop(key)
        if overridden:
            call_log.warning("model_supplied_injected_params_ignored", params=overridden)

        async def fail(
            outcome: Outcome, failure: ToolError, *, version: str | None = None, key: str | None = None
        ) -> McpToolError:
            await record_receipt(
                self.sessions,
                tenant_id=ctx.tenant_id,
                conversation_id=ctx.conversation_id,
                trace_id=ctx.trace_id,
                tool_name=name,
                tool_version=version,
                arguments=model_args,
                outcome=outcome,
                duration_ms=(time.monotonic() - started) * 1000,
                idempotency_key=key,
                error_type=failure.error_type,
                rejection_reason=str(failure)[:500],
            )
            call_log.info("tool_call_failed", outcome=outcome, error_type=failure.error_type)
            return McpToolError.of(failure)

        tools = await self.discover()
        tool = tools.get(name)
        if tool is None:
            raise await fail(
                "rejected",
                ToolError(f"unknown tool {name!r}", error_type="unknown_tool", retryable=bool(not tools)),
            )
        enabled = await self.toolbox(ctx.tenant_id)
        assignment = enabled.get(name)
        if assignment is None:
            await self._alert(ctx, name, overridden)
            raise await fail(
                "rejected", ToolError(FORBIDDEN_MESSAGE, error_type="forbidden"), version=tool.version
            )
        is_write = tool.policy.kind == "write"
        if not offered(ctx, tool.policy.kind):
            raise await fail(
                "rejected", ToolError(UNTRUSTED_REFUSAL, error_type="untrusted_context"), version=tool.version
            )
        problems = sorted(tool.validator.iter_errors(model_args), key=lambda e: list(e.absolute_path))
        unstorable = unstorable_field(model_args)
        if problems or unstorable is not None:
            diagnostics = [
                {"field": ".".join(str(p) for p in e.absolute_path) or "(arguments)", "problem": e.message}
                for e in problems
            ]
            if unstorable is not None:  # the schema cannot say it; the database could not store it
                diagnostics.append({"field": unstorable, "problem": UNSTORABLE_PROBLEM})
            raise await fail(
                "rejected",
                ToolError(
                    "invalid arguments: correct the fields listed in diagnostics and call again",
                    error_type="invalid_arguments",
                    diagnostics=diagnostics,
                ),
                version=tool.version,
            )
        # the model's arguments without injected parameters: a stray tenant_id never changes the key
        key = idempotency_key_for(ctx.trace_id, name, model_args) if is_write else None

        async def proceed() -> Any:
            refusal, timeout_s = await self._limits(ctx, tool, key)
            if refusal is not None:
                raise await fail("rejected", refusal, version=tool.version, key=key)

            full_args = {
                **model_args,
                "tenant_id": str(ctx.tenant_id),
                "customer_id": str(ctx.customer_id) if ctx.customer_id else None,
                "conversation_id": str(ctx.conversation_id) if ctx.conversation_id else None,
                "trace_id": ctx.trace_id,
                "idempotency_key": key,
                # the server uses only the stored configuration; the turn's signed capability instead
                "capability": sign_capability(
                    self._capability_key,
                    tenant_id=ctx.tenant_id,
                    customer_id=ctx.customer_id,
                    conversation_id=ctx.conversation_id,
                    trace_id=ctx.trace_id,
                    tools=sorted(enabled),
                    ttl_s=self.capability_ttl_s,
                ),
            }
            try:
                async with asyncio.timeout(timeout_s):
                    result = await self._request(
                        lambda client: client.call_tool(name, full_args, read_timeout_seconds=timeout_s)
                    )
            except TimeoutError:
                raise await fail(
                    "timeout",
                    ToolError(
                        f"the tool did not answer within {timeout_s:g} s",
                        error_type="timeout",
                        retryable=True,
                    ),
                    version=tool.version,
                    key=key,
                ) from None
            except Exception as exc:  # transport, protocol or output-schema failure: log and convert
                call_log.warning("tool_call_transport_error", error=_describe_exception(exc))
                if "output schema" in str(exc) or "structured content" in str(exc):
                    failure = ToolError("the tool returned an unexpected result", error_type="invalid_result")
                else:
                    self._fresh_until = 0.0  # re-discover on the next turn
                    failure = ToolError(
                        "the tool service is unavailable", error_type="unavailable", retryable=True
                    )
                raise await fail("error", failure, version=tool.version, key=key) from None

            if result.is_error:
                text = " ".join(getattr(part, "text", "") for part in result.content).strip()
                error_type, message = parse_error_text(text)
                if error_type == "forbidden":
                    message = FORBIDDEN_MESSAGE
                outcome: Outcome = "rejected" if error_type in {"forbidden", "missing_tenant"} else "error"
                retryable = error_type in _RETRYABLE
                raise await fail(
                    outcome,
                    ToolError(message[:1000], error_type=error_type, retryable=retryable),
                    version=tool.version,
                    key=key,
                )
            content = result.structured_content
            if tool.output_schema is not None:
                output_errors = list(Draft202012Validator(tool.output_schema).iter_errors(content))
                if content is None or output_errors:
                    call_log.error(
                        "tool_result_shape_violation", problems=[e.message for e in output_errors][:5]
                    )
                    raise await fail(
                        "error",
                        ToolError("the tool returned an unexpected result", error_type="invalid_result"),
                        version=tool.version,
                        key=key,
                    )
            if content is None:
                content = " ".join(getattr(part, "text", "") for part in result.content)
            duration_ms = (time.monotonic() - started) * 1000
            await record_receipt(
                self.sessions,
                tenant_id=ctx.tenant_id,
                conversation_id=ctx.conversation_id,
                trace_id=ctx.trace_id,
                tool_name=name,
                tool_version=tool.version,
                arguments=model_args,
                outcome="ok",
                duration_ms=duration_ms,
                idempotency_key=key,
            )
            call_log.info("tool_call_ok", duration_ms=round(duration_ms, 1), kind=tool.policy.kind)
            if isinstance(content, dict) and content.get("status") == "pending_approval":
                await self._notify_approval(ctx, content.get("pending_action_id"))
            return ToolOutput(content=content)

        if not is_write:
            return await proceed()
        # writes of one turn run one at a time, so parallel tool calls cannot both pass the budget
        lock = self._turn_locks.setdefault(ctx.trace_id, asyncio.Lock())
        async with lock:
            return await proceed()

    async def _notify_approval(self, ctx: ToolContext, action_id: Any) -> None:
        """Tell a person about the action this call created, now (the approvals sweep retries failures)."""
        from switchboard.handoff.pending import notify_pending_actions  # handoff sits above tools

        try:
            await notify_pending_actions(
                self.sessions,
                tenant_id=ctx.tenant_id,
                action_ids=[uuid.UUID(str(action_id))],
                trace_id=ctx.trace_id,
            )
        except Exception as exc:  # the turn goes on; the sweep notifies later
            log.warning(
                "pending_action_notify_failed",
                tenant_id=str(ctx.tenant_id),
                trace_id=ctx.trace_id,
                error=type(exc).__name__,
            )

    async def _limits(
        self, ctx: ToolContext, tool: DiscoveredTool, key: str | None
    ) -> tuple[ToolError | None, float]:
        """Per-turn limits from this turn's receipts (the tool's call limit, the mutation budget) and
        the call's timeout in seconds."""
        async with self.sessions() as session:
            budget, timeout_s = await self._tenant_limits(session, ctx.tenant_id)
            calls = (
                await session.exec(
                    select(func.count())
                    .select_from(ToolReceipt)
                    .where(
                        ToolReceipt.tenant_id == ctx.tenant_id,
                        ToolReceipt.trace_id == ctx.trace_id,
                        ToolReceipt.tool_name == tool.name,
                        ToolReceipt.outcome == "ok",
                    )
                )
            ).one()
            writes = 0
            if key is not None:
                replay = (
                    await session.exec(
                        select(func.count())
                        .select_from(ToolReceipt)
                        .where(
                            ToolReceipt.tenant_id == ctx.tenant_id,
                            ToolReceipt.idempotency_key == key,
                            ToolReceipt.outcome == "ok",
                        )
                    )
                ).one()
                if replay:
                    return None, timeout_s  # the same write again: the server returns the stored outcome
                writes = (
                    await session.exec(
                        select(func.count(func.distinct(ToolReceipt.idempotency_key))).where(
                            ToolReceipt.tenant_id == ctx.tenant_id,
                            ToolReceipt.trace_id == ctx.trace_id,
                            col(ToolReceipt.idempotency_key).is_not(None),
                            ToolReceipt.outcome == "ok",
                        )
                    )
                ).one()
        if key is not None and writes >= budget:
            return ToolError(
                "no more changes can be made for this message: tell the customer a person must review the request",
                error_type="budget_exhausted",
            ), timeout_s
        if calls >= tool.policy.call_limit:
            return ToolError(
                f"{tool.name} was already called {calls} time(s) for this message (limit {tool.policy.call_limit})",
                error_type="call_limit",
            ), timeout_s
        return None, timeout_s

    async def _tenant_limits(self, session: AsyncSession, tenant_id: uuid.UUID) -> tuple[int, float]:
        """``(mutation budget, call timeout in s)`` for the tenant.

        The budget is the tenant's ``tools.mutation_budget`` (else the source's default). The timeout
        stays just under the loop's ``loop.tool_timeout_s`` so this source, not the loop, times the call
        out and leaves its receipt.
        """
        settings = await load_tenant_settings(session, tenant_id)
        budget = settings.tools.mutation_budget
        if budget is None:
            budget = self.mutation_budget
        return budget, min(self.call_timeout_s, settings.loop.tool_timeout_s * LOOP_TIMEOUT_SHARE)

    async def _alert(self, ctx: ToolContext, name: str, overridden: list[str]) -> None:
        await record_security_alert(
            self.sessions,
            tenant_id=ctx.tenant_id,
            kind="tool_forbidden",
            details={
                "tool_name": name,
                "conversation_id": str(ctx.conversation_id) if ctx.conversation_id else None,
                "model_supplied_injected_params": overridden,
                "where": "orchestrator",
            },
            trace_id=ctx.trace_id,
        )


def is_untrusted(ctx: ToolContext) -> bool:
    """Whether untrusted external text is in the turn's context (the orchestrator sets it from the
    channel's capability; :func:`~switchboard.tools.context.offered` is the filter)."""
    return ctx.has_untrusted_content


def _discovered(tool: Any) -> DiscoveredTool:
    contract = (tool.meta or {}).get(CONTRACT_META_KEY) or {}
    read_only = bool(tool.annotations and tool.annotations.read_only_hint)
    try:
        policy = ToolPolicy(
            kind=contract.get("kind") or ("read" if read_only else "write"),
            call_limit=contract.get("call_limit", 3),
            needs_approval=contract.get("needs_approval", False),
        )
    except ValueError:
        # a contract we cannot read: treat the tool as a write (the stricter policy)
        policy = ToolPolicy(kind="write", call_limit=1)
    schema = strip_injected(tool.input_schema)
    return DiscoveredTool(
        name=tool.name,
        description=tool.description or "",
        version=str(contract.get("version") or ""),
        policy=policy,
        model_schema=schema,
        output_schema=tool.output_schema,
        validator=Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER),
    )


def _describe_exception(exc: BaseException) -> str:
    """One line for logs; unwraps exception groups (anyio task groups wrap transport errors)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"[:300]


async def _propagate_trace(request: httpx2.Request) -> None:
    """httpx2 request hook: the current span as ``traceparent`` (httpx2 is not auto-instrumented)."""
    tracing.inject_traceparent(request.headers)
