"""The model gateway: one LiteLLM ``Router`` per tenant, a process-wide concurrency bound, fallback reports.

docs/decisions/model-router.md. For each tenant the deployments are ordered by priority into
groups (``p<priority>``). The Router balances and fails over *inside* a group (``num_retries``,
``allowed_fails``, ``cooldown_time``, ``timeout`` from the tenant's
:class:`~switchboard.llm.config.LLMSettings`); the gateway walks the groups in order itself
(:meth:`ModelGateway.complete`), because the policy between groups is ours:

* **no hidden waits**: LiteLLM's retries honour a provider's ``Retry-After`` up to 60 s (measured: a
  503 with ``Retry-After: 5`` and 2 retries took 11 s before the fallback answered), so a group of one
  deployment is called with ``num_retries=0`` and the gateway retries it only for 5xx/connection
  errors, waiting at most ``max_retry_wait_s``. A ``Retry-After`` beyond that cap, a 429 or a timeout
  is not retried: the deployment cools down (for ``Retry-After`` seconds, at most
  ``max_retry_after_cooldown_s``, else ``cooldown_s``) and the next group answers at once. Groups
  whose every deployment is cooling down are skipped (all tried anyway when every group is).
* **an empty answer is a failure**: a completion without tool calls whose visible text (after
  :func:`~switchboard.llm.trimming.strip_reasoning`) is empty counts as that deployment failing and
  the next group is called; the reply records the deployment that really answered.
* **context-window fallback**: a context-overflow error moves only to a later group whose context
  window is larger than the limit the provider stated (or than the failing group's); without one,
  :class:`ContextOverflow` carries the stated limit so the loop can shrink the prompt to it.

Provider SDK retries are off (``max_retries=0``). Every call holds the gateway's semaphore (default
50 process-wide). LiteLLM facts this relies on (LiteLLM Router docs and source): ``Router`` cannot be subclassed;
in-group failover needs ``num_retries >= 1``; the answering deployment is
``response._hidden_params["model_id"]`` (our readable ``model_info.id``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import time
import uuid
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any, Protocol

import httpx

from switchboard.crypto import CredentialCipher, CredentialDecryptError
from switchboard.egress import EgressPolicy, egress_scope
from switchboard.llm import import_litellm
from switchboard.llm.config import (
    DeploymentSettings,
    LLMSettings,
    MediaKind,
    default_deployments,
    is_platform_default,
)
from switchboard.llm.costs import call_cost, group_router_key, transcription_cost
from switchboard.llm.keys import choose_key, deployment_key_provider
from switchboard.llm.trimming import stated_context_limit, strip_reasoning
from switchboard.observability import get_logger, metrics, tracing
from switchboard.settings import Settings

if TYPE_CHECKING:  # litellm is imported on first use (switchboard.llm.import_litellm)
    from litellm import Router

__all__ = [
    "ModelGateway",
    "ModelReply",
    "TenantRouter",
    "RouterGroup",
    "ModelCallFailed",
    "ContextOverflow",
    "EmptyCompletion",
    "retry_after_s",
]

log = get_logger(__name__)

DEFAULT_MAX_CONCURRENT_CALLS = 50
"""Process-wide bound on concurrent model calls (``MODEL_CALL_CONCURRENCY``)."""
_FAILURE_MEMORY = 2048
"""Calls whose failures the recorder remembers at most (oldest forgotten first)."""
_CALL_KEY = "switchboard_call_id"
_FAIL_WINDOW_S = 60.0
"""Failures of a deployment counted against ``allowed_fails`` within this window (LiteLLM's minute)."""
_BACKOFF_INITIAL_S = 0.25
"""First retry wait of a single-deployment group (doubles per retry, capped by ``max_retry_wait_s``)."""
NO_KEY = "not-needed"
"""The key sent by a deployment without one: Ollama, the offline server and many OpenAI-compatible
servers take any key; a provider answers 401."""
_RETRYABLE_STATUS = frozenset({500, 502, 503, 504})
_TIMEOUT_STEP_S = 0.5
"""Per-call timeouts under a deadline are whole multiples of this (seconds; see ``_group_timeout``)."""
_TIMEOUT_SLACK_S = 0.05
"""A deadline's timeout may exceed the time left by at most this (seconds), so ``now + 20`` gives 20."""


class ModelCallFailed(Exception):
    """Every deployment of every group failed (after retries and fallbacks); ``error`` is LiteLLM's.

    Attributes:
        failed_deployments: ``[{"deployment", "error"}]`` in the order they failed.
    """

    def __init__(
        self,
        error: BaseException,
        failed_deployments: list[dict[str, str]] | None = None,
        *,
        errors: list[BaseException] | None = None,
    ) -> None:
        self.error = error
        self.failed_deployments = failed_deployments or []
        self.errors = errors or [error]
        """Every group's last error, in the order the groups were called (``[error]`` when not kept)."""
        super().__init__(f"{type(error).__name__}: {str(error)[:300]}")


class ContextOverflow(ModelCallFailed):
    """The provider said the prompt is longer than the model's context window.

    Attributes:
        limit_tokens: the window the provider's error stated (``None`` when it stated none).
        window_tokens: the window the gateway assumed for the group that overflowed.
    """

    def __init__(
        self,
        error: BaseException,
        failed_deployments: list[dict[str, str]] | None = None,
        *,
        limit_tokens: int | None = None,
        window_tokens: int | None = None,
    ) -> None:
        super().__init__(error, failed_deployments)
        self.limit_tokens = limit_tokens
        self.window_tokens = window_tokens


class EmptyCompletion(Exception):
    """A deployment answered 200 with no visible text and no tool calls (treated as its failure)."""


@dataclass
class ModelReply:
    """One model response, reduced to what the tool loop needs."""

    content: str | None
    tool_calls: list[dict[str, Any]]
    """OpenAI shape: ``[{"id", "type": "function", "function": {"name", "arguments": str}}]``."""
    model_id: str | None
    """``model_info.id`` of the deployment that answered."""
    model_group: str | None
    fallback_used: bool
    failed_deployments: list[dict[str, str]]
    """``[{"deployment", "error"}]`` seen during this call (retries and fallbacks)."""
    prompt_tokens: int
    completion_tokens: int
    duration_ms: float
    cost_usd: float = 0.0
    """USD of this call: :func:`switchboard.llm.costs.call_cost` of the answering deployment (computed
    once, here; 0 when unpriced)."""
    priced: bool = False
    """Whether LiteLLM's cost map prices the answering deployment (an unpriced call counts as 0 USD)."""

    def assistant_message(self) -> dict[str, Any]:
        """The assistant message to append to the history."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content or ""}
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        return message


class _FailureRecorder(Protocol):
    """LiteLLM callback collecting per-call deployment failures (keyed by our call id in metadata).

    The class is built on first use (:func:`_recorder_class`): it subclasses LiteLLM's
    ``CustomLogger``, and LiteLLM is not imported until a model is called.
    """

    def take(self, call_id: str) -> list[dict[str, str]]:
        """The failures recorded for one call (forgotten once taken)."""
        ...


@cache
def _recorder_class() -> type:
    from litellm.integrations.custom_logger import CustomLogger

    class FailureRecorder(CustomLogger):
        def __init__(self) -> None:
            super().__init__()
            self.failures: OrderedDict[str, list[dict[str, str]]] = OrderedDict()

        async def async_log_failure_event(self, kwargs, response_obj, start_time, end_time):  # type: ignore[no-untyped-def]
            params = kwargs.get("litellm_params") or {}
            metadata = params.get("metadata") or kwargs.get("metadata") or {}
            call_id = metadata.get(_CALL_KEY)
            if not call_id:
                return
            info = kwargs.get("model_info") or params.get("model_info") or {}
            error = kwargs.get("exception")
            entry = {
                "deployment": str(info.get("id") or params.get("model") or "?"),
                "error": f"{type(error).__name__}: {str(error)[:200]}" if error else "unknown",
            }
            self.failures.setdefault(call_id, []).append(entry)
            while len(self.failures) > _FAILURE_MEMORY:
                self.failures.popitem(last=False)

        async def log_success_fallback_event(self, original_model_group, kwargs, original_exception):  # type: ignore[no-untyped-def]
            return None  # LiteLLM awaits this hook; the fallback is logged by the gateway after the call

        async def log_failure_fallback_event(self, original_model_group, kwargs, original_exception):  # type: ignore[no-untyped-def]
            return None

        def take(self, call_id: str) -> list[dict[str, str]]:
            return self.failures.pop(call_id, [])

    return FailureRecorder


def _recorder() -> _FailureRecorder:
    """The process's one recorder, registered in ``litellm.callbacks`` (imports LiteLLM)."""
    litellm = import_litellm()
    recorder_class = _recorder_class()
    for callback in litellm.callbacks:
        if isinstance(callback, recorder_class):
            return callback
    recorder = recorder_class()
    litellm.callbacks.append(recorder)
    return recorder


def retry_after_s(error: BaseException) -> float | None:
    """Seconds a provider's ``Retry-After`` (or ``retry-after-ms``) header on ``error`` asks to wait.

    Reads the HTTP response LiteLLM/OpenAI errors carry (``error.response.headers``, else
    ``error.litellm_response_headers``). HTTP-date values are not parsed (``None``). RFC 9110 §10.2.3.
    """
    headers: Any = None
    response = getattr(error, "response", None)
    if response is not None:
        headers = getattr(response, "headers", None)
    if not headers:
        headers = getattr(error, "litellm_response_headers", None)
    if not headers:
        return None
    try:
        milliseconds = headers.get("retry-after-ms")
        if milliseconds is not None:
            return max(0.0, float(milliseconds) / 1000)
        value = headers.get("retry-after")
        return max(0.0, float(value)) if value is not None else None
    except (TypeError, ValueError):
        return None


def _group_timeout(llm: LLMSettings, deadline: float | None, *, is_last: bool) -> float | None:
    """Per-request timeout of one group call under the turn ``deadline`` (``None``: the deployments' own).

    A group that is not the last keeps ``fallback_reserve_s`` for the next; never below 1 s. The time
    left is rounded down to :data:`_TIMEOUT_STEP_S` (after adding :data:`_TIMEOUT_SLACK_S`): LiteLLM
    caches its provider client per timeout value, so a fresh float per call (the input guardrail's
    ``now + timeout_s``) built a new client and TCP connection for every call.
    """
    if deadline is None:
        return None
    left = deadline - time.monotonic() - (0.0 if is_last else llm.fallback_reserve_s)
    if left >= llm.request_timeout_s:
        return None
    return max(1.0, math.floor((left + _TIMEOUT_SLACK_S) / _TIMEOUT_STEP_S) * _TIMEOUT_STEP_S)


def _timeout(seconds: float, llm: LLMSettings) -> httpx.Timeout:
    """A request timeout of ``seconds`` whose connect phase is at most ``llm.connect_timeout_s``: a
    provider that cannot be reached fails fast, one that answers slowly keeps the whole time."""
    return httpx.Timeout(seconds, connect=min(llm.connect_timeout_s, seconds))


def _status(error: BaseException) -> int | None:
    code = getattr(error, "status_code", None)
    return code if isinstance(code, int) else None


@dataclass
class RouterGroup:
    """One priority group: its Router model name, deployments and context window."""

    name: str
    deployment_ids: list[str]
    context_window_tokens: int
    """Smallest context window among the group's deployments (tokens)."""


@dataclass
class TenantRouter:
    """A tenant's Router, its groups in fallback order, and the gateway's cooldowns for it."""

    router: Router
    fingerprint: str
    first_group: str
    deployments: list[DeploymentSettings]
    context_window_tokens: int
    """Smallest context window among the deployments (tokens): the trimming budget's base."""
    count_model: str
    """LiteLLM model name used to count tokens (the first deployment's)."""
    groups: list[RouterGroup] = field(default_factory=list)
    tenant_id: str = ""
    """Whose Router (the ``tenant`` label of the token and cost metrics)."""
    record_metrics: bool = True
    """False for a router whose calls are no traffic ("Test this deployment"): they add no series."""
    cooldown_until: dict[str, float] = field(default_factory=dict)
    """Deployment id -> ``time.monotonic()`` until which the gateway skips it."""
    recent_failures: dict[str, deque[float]] = field(default_factory=dict)
    """Deployment id -> monotonic times of its recent failures (``allowed_fails`` window)."""
    built_from: LLMSettings | None = field(default=None, repr=False)
    """The settings object it was built from: the same object again (tenant settings are parsed once
    per content, :func:`~switchboard.tenant_settings.cached_tenant_settings`) skips the fingerprint."""

    def is_cooling(self, deployment_id: str, now: float) -> bool:
        return self.cooldown_until.get(deployment_id, 0.0) > now

    def cool_down(self, deployment_id: str, seconds: float, *, reason: str) -> None:
        until = time.monotonic() + seconds
        self.cooldown_until[deployment_id] = max(self.cooldown_until.get(deployment_id, 0.0), until)
        log.warning(
            "deployment_cooldown", deployment=deployment_id, cooldown_s=round(seconds, 3), reason=reason
        )

    def walk(self, candidates: list[RouterGroup], trace_id: str) -> tuple[list[RouterGroup], list[str]]:
        """``(groups to call in order, names of the groups skipped)``: groups whose every deployment is
        cooling down are skipped, unless every group is (trying beats failing without a call)."""
        now = time.monotonic()
        walk = [g for g in candidates if not all(self.is_cooling(d, now) for d in g.deployment_ids)]
        skipped = [g.name for g in candidates if g not in walk]
        if not walk:
            walk = list(candidates)
        if skipped:
            log.info("model_groups_skipped_cooling", trace_id=trace_id, groups=skipped)
        return walk, skipped

    def note_failure(self, deployment_id: str, llm: LLMSettings) -> None:
        """Count a failure; past ``allowed_fails`` within a minute the deployment cools down ``cooldown_s``."""
        now = time.monotonic()
        times = self.recent_failures.setdefault(deployment_id, deque())
        times.append(now)
        while times and times[0] < now - _FAIL_WINDOW_S:
            times.popleft()
        if len(times) > llm.allowed_fails:
            times.clear()
            self.cool_down(deployment_id, llm.cooldown_s, reason="allowed_fails")


@dataclass
class ModelGateway:
    """Routers per tenant (cached, rebuilt when the tenant's model settings change) and the semaphore.

    Args:
        settings: process settings (fallback provider keys, model server port).
        cipher: decrypts per-tenant API keys.
        max_concurrent_calls: semaphore size (process-wide bound on in-flight model calls).
    """

    settings: Settings
    cipher: CredentialCipher
    max_concurrent_calls: int = DEFAULT_MAX_CONCURRENT_CALLS
    _routers: dict[uuid.UUID, TenantRouter] = field(default_factory=dict, init=False)
    semaphore: asyncio.Semaphore = field(init=False)

    def __post_init__(self) -> None:
        self.semaphore = asyncio.Semaphore(self.max_concurrent_calls)
        self.egress = EgressPolicy.for_models(self.settings)
        """Where provider calls may connect: a tenant's ``api_base`` must be a public address
        (:mod:`switchboard.egress`); the operator's ``MODEL_SERVER_URL`` is trusted."""
        self._recorder: _FailureRecorder | None = None
        """Registered with LiteLLM by the first :meth:`router_for` (so LiteLLM loads on first use)."""

    # --- routers -----------------------------------------------------------------------------
    def _api_key(self, deployment: DeploymentSettings) -> str:
        """The key LiteLLM sends with ``deployment`` (:func:`switchboard.llm.keys.choose_key`).

        Without one it is a placeholder, never ``None``: LiteLLM and the provider SDKs would read
        ``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY`` from the environment for ``None``.
        """
        stored: str | None = None
        if deployment.api_key_encrypted:
            try:
                stored = str(self.cipher.decrypt(deployment.api_key_encrypted)["api_key"])
            except (CredentialDecryptError, KeyError) as exc:
                log.error("deployment_api_key_unreadable", deployment=deployment.id)
                raise CredentialDecryptError(f"api key of deployment {deployment.id} is unreadable") from exc
        key = choose_key(
            self.settings,
            provider=deployment_key_provider(deployment.provider, deployment.litellm_model()),
            api_base=deployment.api_base,
            stored_key=stored,
            platform_default=is_platform_default(self.settings, deployment),
            what=f"deployment {deployment.id}",
        )
        return key or NO_KEY

    def _context_window(self, deployment: DeploymentSettings, llm: LLMSettings) -> int:
        if deployment.max_input_tokens:
            return deployment.max_input_tokens
        try:
            info = import_litellm().get_model_info(deployment.litellm_model())
            return int(info.get("max_input_tokens") or llm.default_context_window_tokens)
        except Exception:  # ModelNotMappedError and friends: unknown model
            return llm.default_context_window_tokens

    def is_offline(self, llm: LLMSettings) -> bool:
        """Whether every deployment the tenant would use is the offline model server (no provider model:
        features that would spend a model call use their deterministic stand-in, e.g. lead intent)."""
        return all(d.provider == "offline" for d in (llm.deployments or default_deployments(self.settings)))

    def router_for(
        self, tenant_id: uuid.UUID, llm: LLMSettings, *, owner: uuid.UUID | None = None
    ) -> TenantRouter:
        """The tenant's Router, built on first use and rebuilt when ``llm`` changed.

        ``tenant_id`` is the cache key: the tenant's id, or for a tenant's second Router (guardrails, one
        group) a key derived from it (:func:`switchboard.llm.costs.group_router_key`), with the tenant in
        ``owner``: logs and the per-tenant token and cost metrics name the tenant, never the derived key.

        Raises:
            CredentialDecryptError: a deployment's ``api_key_encrypted`` cannot be decrypted (logged
                as ``deployment_api_key_unreadable`` with the deployment id).
        """
        cached = self._routers.get(tenant_id)
        if cached is not None and cached.built_from is llm:
            return cached
        deployments = sorted(
            llm.deployments or default_deployments(self.settings), key=lambda d: (d.priority, d.id)
        )
        fingerprint = hashlib.sha256(
            json.dumps(
                [
                    llm.model_dump(exclude={"deployments"}),
                    [d.model_dump() for d in deployments],
                ],
                sort_keys=True,
                default=str,
            ).encode()
        ).hexdigest()
        if cached is not None and cached.fingerprint == fingerprint:
            cached.built_from = llm
            return cached
        litellm = import_litellm()
        if self._recorder is None:
            self._recorder = _recorder()
        groups: dict[int, str] = {}
        model_list = []
        for deployment in deployments:
            group = groups.setdefault(deployment.priority, f"p{deployment.priority}")
            params: dict[str, Any] = {
                "model": deployment.litellm_model(),
                "api_key": self._api_key(deployment),
                "max_retries": 0,
                "timeout": _timeout(deployment.timeout_s or llm.request_timeout_s, llm),
            }
            if deployment.api_base:
                params["api_base"] = deployment.api_base
            elif deployment.provider == "offline":  # the platform's own offline model server
                params["api_base"] = self.settings.model_server_url + "/v1"
            if deployment.provider == "offline":
                # the offline model is free: an explicit zero price spares every call LiteLLM's zero-cost
                # diagnostic, which walks the whole price map for an unpriced model (~2.3 ms per call, idle);
                # our own price comes from llm.costs either way
                params["input_cost_per_token"] = 0.0
                params["output_cost_per_token"] = 0.0
                params["cache_creation_input_token_cost"] = 0.0  # else LiteLLM warns they default to 0
                params["cache_read_input_token_cost"] = 0.0
            info: dict[str, Any] = {"id": deployment.id}
            if deployment.max_input_tokens:
                info["max_input_tokens"] = deployment.max_input_tokens
            model_list.append({"model_name": group, "litellm_params": params, "model_info": info})
        ordered = list(dict.fromkeys(groups.values()))
        router = litellm.Router(
            model_list=model_list,
            fallbacks=[],  # the gateway walks the groups (module docstring)
            num_retries=llm.num_retries,
            allowed_fails=llm.allowed_fails,
            cooldown_time=llm.cooldown_s,
            timeout=llm.request_timeout_s,
        )
        windows = {d.id: self._context_window(d, llm) for d in deployments}
        router_groups = [
            RouterGroup(
                name=name,
                deployment_ids=[d.id for d in deployments if f"p{d.priority}" == name],
                context_window_tokens=min(windows[d.id] for d in deployments if f"p{d.priority}" == name),
            )
            for name in ordered
        ]
        built = TenantRouter(
            router=router,
            fingerprint=fingerprint,
            first_group=ordered[0],
            deployments=deployments,
            context_window_tokens=min(windows.values()),
            count_model=deployments[0].litellm_model(),
            groups=router_groups,
            tenant_id=str(owner or tenant_id),
            built_from=llm,
        )
        self._routers[tenant_id] = built
        log.info(
            "router_built",
            tenant_id=str(owner or tenant_id),
            router_key=str(tenant_id) if owner is not None and owner != tenant_id else None,
            deployments=[d.id for d in deployments],
            groups=ordered,
            rebuilt=cached is not None,
        )
        return built

    # --- calls -------------------------------------------------------------------------------
    async def complete(
        self,
        tenant_router: TenantRouter,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None,
        llm: LLMSettings,
        trace_id: str,
        min_context_tokens: int | None = None,
        deadline: float | None = None,
        response_format: dict[str, Any] | None = None,
    ) -> ModelReply:
        """:meth:`_complete` inside an ``llm.call`` span, counted (``switchboard_model_*`` metrics).

        The span says which deployment answered, the tokens, and whether a fallback fired (attribute
        ``llm.fallback`` and a ``fallback`` event naming the failed deployments).
        """
        attributes = {
            "llm.first_group": tenant_router.first_group,
            "llm.tools": len(tools or []),
            "llm.messages": len(messages),
        }
        with tracing.span("llm.call", kind=tracing.SpanKind.CLIENT, attributes=attributes) as current:
            try:
                reply = await self._complete(
                    tenant_router,
                    messages,
                    tools=tools,
                    llm=llm,
                    trace_id=trace_id,
                    min_context_tokens=min_context_tokens,
                    deadline=deadline,
                    response_format=response_format,
                )
            except ModelCallFailed as exc:
                outcome = "context_overflow" if isinstance(exc, ContextOverflow) else "failed"
                if tenant_router.record_metrics:
                    for failure in exc.failed_deployments:
                        metrics.MODEL_CALLS.labels(_deployment_label(failure), "error").inc()
                    metrics.MODEL_CALLS.labels("none", outcome).inc()
                current.set_attribute("llm.outcome", outcome)
                raise
            _count_reply(tenant_router, reply, current)
            return reply

    # --- media: transcription and vision ---------------------------------------------------------
    def media_deployments(self, llm: LLMSettings, kind: MediaKind) -> list[DeploymentSettings]:
        """The tenant's deployments for ``kind``; empty: the platform's own endpoint serves it.

        ``transcription``: ``llm.transcription``. ``vision``: ``llm.vision``, else the tenant's own chat
        deployments (``llm.deployments``, never the platform's defaults) that LiteLLM's model table says
        take images (``litellm.supports_vision``)."""
        if kind == "transcription":
            return list(llm.transcription)
        if llm.vision:
            return list(llm.vision)
        litellm = import_litellm()
        chosen = []
        for deployment in llm.deployments:
            try:
                if litellm.supports_vision(model=deployment.litellm_model()):
                    chosen.append(deployment)
            except Exception:  # noqa: BLE001 (an unknown model: not known to take images)
                continue
        return chosen

    def media_router(
        self, tenant_id: uuid.UUID, llm: LLMSettings, deployments: list[DeploymentSettings], kind: MediaKind
    ) -> TenantRouter:
        """The tenant's Router of ``deployments`` for ``kind`` (a second Router, cached under a key
        derived from the tenant: :func:`switchboard.llm.costs.group_router_key`), with the tenant's
        Router policy (retries, cooldowns, timeouts).

        Raises:
            CredentialDecryptError: a deployment's stored key cannot be decrypted.
            ValueError: ``deployments`` is empty.
        """
        if not deployments:
            raise ValueError(f"no {kind} deployments")
        media_llm = llm.model_copy(update={"deployments": deployments})
        return self.router_for(group_router_key(tenant_id, f"media:{kind}"), media_llm, owner=tenant_id)

    async def transcribe(
        self,
        tenant_router: TenantRouter,
        file: tuple[str, bytes, str],
        *,
        llm: LLMSettings,
        trace_id: str,
        deadline: float | None = None,
        audio_seconds: float | None = None,
    ) -> ModelReply:
        """Speech to text through the groups of ``tenant_router`` in order (the same walk, retries,
        cooldowns and deadline as :meth:`complete`), counted in the ``switchboard_model_*`` metrics.

        Args:
            file: ``(filename, bytes, content type)`` of the audio (``voice.ogg``, ..., ``audio/ogg``).
            deadline: ``time.monotonic()`` by which the text is needed.
            audio_seconds: the audio's length, which prices the call (``None``: unpriced).

        Returns:
            A reply whose ``content`` is the transcript (possibly empty: silence), ``cost_usd`` its price.

        Raises:
            ModelCallFailed: every group failed; ``errors`` holds each group's error (a refused file
                format is a 400/415 among them).
        """
        with tracing.span(
            "llm.transcription",
            kind=tracing.SpanKind.CLIENT,
            attributes={"llm.first_group": tenant_router.first_group},
        ) as current:
            recorder = self._recorder if self._recorder is not None else _recorder()
            started = time.perf_counter()
            failures: list[dict[str, str]] = []
            errors: list[BaseException] = []
            walk, skipped = tenant_router.walk(tenant_router.groups, trace_id)
            async with self.semaphore:
                for position, group in enumerate(walk):
                    timeout_s = _group_timeout(llm, deadline, is_last=position == len(walk) - 1)
                    try:
                        response = await self._call_group(
                            tenant_router,
                            group,
                            [],
                            None,
                            llm,
                            trace_id,
                            recorder,
                            failures,
                            timeout_s,
                            file=file,
                        )
                    except Exception as exc:  # LiteLLM/OpenAI errors of every kind: this group failed
                        errors.append(exc)
                        continue
                    model_id = (getattr(response, "_hidden_params", {}) or {}).get("model_id")
                    deployment = next((d for d in tenant_router.deployments if d.id == model_id), None)
                    cost = transcription_cost(deployment, audio_seconds)
                    reply = ModelReply(
                        content=str(getattr(response, "text", "") or ""),
                        tool_calls=[],
                        model_id=model_id,
                        model_group=group.name,
                        fallback_used=position > 0 or bool(skipped),
                        failed_deployments=list(failures),
                        prompt_tokens=0,
                        completion_tokens=0,
                        duration_ms=(time.perf_counter() - started) * 1000,
                        cost_usd=cost.usd,
                        priced=cost.priced,
                    )
                    if reply.fallback_used:
                        log.warning(
                            "model_fallback",
                            trace_id=trace_id,
                            answered_by=model_id,
                            answered_group=group.name,
                            failed_deployments=failures,
                            call="transcription",
                        )
                    _count_reply(tenant_router, reply, current, empty_ok=True)
                    return reply
            error = errors[0] if errors else EmptyCompletion("no group could be called")
            if tenant_router.record_metrics:
                for failure in failures:
                    metrics.MODEL_CALLS.labels(_deployment_label(failure), "error").inc()
                metrics.MODEL_CALLS.labels("none", "failed").inc()
            current.set_attribute("llm.outcome", "failed")
            log.error(
                "model_call_failed",
                trace_id=trace_id,
                call="transcription",
                error=f"{type(error).__name__}: {str(error)[:300]}",
                failed_deployments=failures,
            )
            raise ModelCallFailed(error, failures, errors=errors) from error

    async def _complete(
        self,
        tenant_router: TenantRouter,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None,
        llm: LLMSettings,
        trace_id: str,
        min_context_tokens: int | None = None,
        deadline: float | None = None,
        response_format: dict[str, Any] | None = None,
    ) -> ModelReply:
        """One chat completion through the tenant's groups in order, inside the semaphore.

        Args:
            tenant_router: from :meth:`router_for`.
            messages: OpenAI chat messages (already trimmed).
            tools: OpenAI tool definitions, or ``None``/``[]`` for a words-only call.
            trace_id: recorded in LiteLLM metadata and logs.
            min_context_tokens: only groups whose context window is larger than this are called
                (the loop's context-window fallback after an overflow); ``None``: every group.
            deadline: ``time.monotonic()`` by which the turn must be answered; a group that is not
                the last gets a request timeout of at most the time left minus ``fallback_reserve_s``.
            response_format: OpenAI ``response_format`` (``{"type": "json_schema", ...}``) for
                structured output (the guardrails); LiteLLM translates it for other providers.

        Returns:
            The reply of the first group that answered with words or tool calls. When every group
            answered empty, the last (empty) reply, ``fallback_used`` set.

        Raises:
            ContextOverflow: the prompt is too long for every group that could take it
                (``limit_tokens`` = the limit the provider stated, when it stated one).
            ModelCallFailed: every group failed (timeouts, 5xx, 429...); ``failed_deployments`` says how.
        """
        litellm = import_litellm()
        recorder = self._recorder if self._recorder is not None else _recorder()
        started = time.perf_counter()
        failures: list[dict[str, str]] = []
        candidates = [
            g
            for g in tenant_router.groups
            if min_context_tokens is None or g.context_window_tokens > min_context_tokens
        ]
        walk, skipped = tenant_router.walk(candidates, trace_id)
        first_error: BaseException | None = None
        errors: list[BaseException] = []
        overflow: tuple[BaseException, int | None, int] | None = None
        empty_reply: ModelReply | None = None
        overflow_floor = min_context_tokens
        async with self.semaphore:
            for position, group in enumerate(walk):
                if overflow_floor is not None and group.context_window_tokens <= overflow_floor:
                    continue  # an overflow earlier in this call: only a larger window can take the prompt
                timeout_s = _group_timeout(llm, deadline, is_last=position == len(walk) - 1)
                try:
                    response = await self._call_group(
                        tenant_router,
                        group,
                        messages,
                        tools,
                        llm,
                        trace_id,
                        recorder,
                        failures,
                        timeout_s,
                        response_format=response_format,
                    )
                except litellm.ContextWindowExceededError as exc:
                    limit = stated_context_limit(str(exc))
                    overflow = (exc, limit, group.context_window_tokens)
                    overflow_floor = max(overflow_floor or 0, limit or group.context_window_tokens)
                    log.warning(
                        "model_context_overflow",
                        trace_id=trace_id,
                        group=group.name,
                        stated_limit_tokens=limit,
                        assumed_window_tokens=group.context_window_tokens,
                    )
                    continue
                except Exception as exc:  # LiteLLM/OpenAI errors of every kind: this group failed
                    first_error = first_error or exc  # raised when all fail, as LiteLLM's fallbacks do
                    errors.append(exc)
                    continue
                reply = self._reply(
                    tenant_router, response, group, started, failures, fallback=position > 0 or bool(skipped)
                )
                if not reply.tool_calls and not strip_reasoning(reply.content):
                    deployment = reply.model_id or group.name
                    failures.append({"deployment": deployment, "error": "EmptyCompletion: no visible text"})
                    tenant_router.note_failure(deployment, llm)
                    log.warning(
                        "model_empty_completion", trace_id=trace_id, deployment=deployment, group=group.name
                    )
                    empty_reply = reply
                    continue
                if reply.fallback_used:
                    log.warning(
                        "model_fallback",
                        trace_id=trace_id,
                        answered_by=reply.model_id,
                        answered_group=group.name,
                        failed_deployments=failures,
                        skipped_groups=skipped,
                        duration_ms=round(reply.duration_ms, 1),
                    )
                return reply
        if overflow is not None:  # the loop can shrink the prompt and call again
            exc, limit, window = overflow
            raise ContextOverflow(exc, failures, limit_tokens=limit, window_tokens=window) from exc
        if empty_reply is not None:
            empty_reply.fallback_used = len(walk) > 1 or bool(skipped)
            empty_reply.failed_deployments = failures
            empty_reply.duration_ms = (time.perf_counter() - started) * 1000
            return empty_reply
        error = first_error or EmptyCompletion("no group could be called")
        log.error(
            "model_call_failed",
            trace_id=trace_id,
            error=f"{type(error).__name__}: {str(error)[:300]}",
            failed_deployments=failures,
        )
        raise ModelCallFailed(error, failures, errors=errors or None) from error

    async def _call_group(
        self,
        tenant_router: TenantRouter,
        group: RouterGroup,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        llm: LLMSettings,
        trace_id: str,
        recorder: _FailureRecorder,
        failures: list[dict[str, str]],
        timeout_s: float | None = None,
        *,
        response_format: dict[str, Any] | None = None,
        file: tuple[str, bytes, str] | None = None,
    ) -> Any:
        """Call one group: the Router's in-group failover for several deployments; for one, our own
        capped retries (module docstring). Failures are appended to ``failures``. With ``file``
        (``(filename, bytes, content type)``) the call is a transcription of it, not a completion.

        Raises:
            Exception: LiteLLM's error of the group's last attempt.
        """
        single = len(group.deployment_ids) == 1
        attempts = 1 + (llm.num_retries if single else 0)
        kwargs: dict[str, Any] = {"model": group.name}
        if file is not None:
            kwargs["file"] = file
            call = tenant_router.router.atranscription
        else:
            kwargs["messages"] = messages
            call = tenant_router.router.acompletion
        if tools:
            kwargs["tools"] = tools
            kwargs["tool_choice"] = "auto"
        if llm.max_output_tokens and file is None:
            kwargs["max_tokens"] = llm.max_output_tokens
        if response_format is not None:
            kwargs["response_format"] = response_format
        if single:
            kwargs["num_retries"] = 0  # LiteLLM's retries would wait out Retry-After (up to 60 s)
        if timeout_s is not None:
            kwargs["timeout"] = _timeout(timeout_s, llm)  # the turn budget, keeping time for the next group
        for attempt in range(attempts):
            call_id = uuid.uuid4().hex
            kwargs["metadata"] = {_CALL_KEY: call_id, "trace_id": trace_id}
            try:
                with egress_scope(self.egress):  # the connection is checked and pinned there
                    return await call(**kwargs)
            except Exception as exc:
                recorded = recorder.take(call_id)
                failures.extend(
                    recorded
                    or [{"deployment": group.name, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}]
                )
                deployment = recorded[-1]["deployment"] if recorded else group.deployment_ids[0]
                if type(exc).__name__ == "ContextWindowExceededError":
                    raise
                wait = retry_after_s(exc)
                status = _status(exc)
                if wait is not None and wait > llm.max_retry_wait_s:
                    tenant_router.cool_down(
                        deployment, min(wait, llm.max_retry_after_cooldown_s), reason="retry_after"
                    )
                    raise
                if status == 429:
                    tenant_router.cool_down(
                        deployment,
                        min(wait or llm.cooldown_s, llm.max_retry_after_cooldown_s),
                        reason="rate_limited",
                    )
                    raise
                tenant_router.note_failure(deployment, llm)
                retryable = status in _RETRYABLE_STATUS or type(exc).__name__ == "APIConnectionError"
                if not single or not retryable or attempt + 1 >= attempts:
                    raise
                pause = min(
                    llm.max_retry_wait_s, wait if wait is not None else _BACKOFF_INITIAL_S * 2**attempt
                )
                log.info(
                    "model_retry", trace_id=trace_id, deployment=deployment, attempt=attempt + 1, wait_s=pause
                )
                if pause > 0:
                    await asyncio.sleep(pause)
        raise AssertionError("unreachable")  # pragma: no cover (the loop returns or raises)

    def _reply(
        self,
        tenant_router: TenantRouter,
        response: Any,
        group: RouterGroup,
        started: float,
        failures: list[dict[str, str]],
        *,
        fallback: bool,
    ) -> ModelReply:
        hidden = getattr(response, "_hidden_params", {}) or {}
        model_id = hidden.get("model_id")
        message = response.choices[0].message
        tool_calls = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.function.name, "arguments": call.function.arguments or ""},
            }
            for call in (getattr(message, "tool_calls", None) or [])
        ]
        usage = getattr(response, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        deployment = next((d for d in tenant_router.deployments if d.id == model_id), None)
        cost = call_cost(deployment, prompt_tokens, completion_tokens)
        return ModelReply(
            content=message.content,
            tool_calls=tool_calls,
            model_id=model_id,
            model_group=group.name,
            fallback_used=fallback,
            failed_deployments=list(failures),
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            duration_ms=(time.perf_counter() - started) * 1000,
            cost_usd=cost.usd,
            priced=cost.priced,
        )


def _deployment_label(failure: dict[str, str]) -> str:
    return metrics.DEPLOYMENT_LABELS(failure.get("deployment", "unknown"))


def _count_reply(
    tenant_router: TenantRouter, reply: ModelReply, current: Any, *, empty_ok: bool = False
) -> None:
    """Metrics (unless the router records none) and span attributes of one answered gateway call.

    Label values a tenant named (deployment id, model) go through the bounded label sets of
    :mod:`switchboard.observability.metrics`."""
    deployment = reply.model_id or reply.model_group or "unknown"
    outcome = "ok" if empty_ok or reply.tool_calls or strip_reasoning(reply.content) else "empty"
    model = next((d.model for d in tenant_router.deployments if d.id == reply.model_id), deployment)
    if tenant_router.record_metrics:
        label = metrics.DEPLOYMENT_LABELS(deployment)
        for failure in reply.failed_deployments:
            metrics.MODEL_CALLS.labels(_deployment_label(failure), "error").inc()
        metrics.MODEL_CALLS.labels(label, outcome).inc()
        metrics.MODEL_CALL_SECONDS.labels(label).observe(reply.duration_ms / 1000)
        tenant, model_label = tenant_router.tenant_id or "unknown", metrics.MODEL_LABELS(model)
        metrics.MODEL_TOKENS.labels(tenant, model_label, "prompt").inc(reply.prompt_tokens)
        metrics.MODEL_TOKENS.labels(tenant, model_label, "completion").inc(reply.completion_tokens)
        metrics.MODEL_COST_USD.labels(tenant, model_label).inc(max(reply.cost_usd, 0.0))
        if reply.fallback_used:
            metrics.MODEL_FALLBACKS.labels(label).inc()
    if not current.is_recording():
        return
    current.set_attributes(
        {
            "llm.deployment": deployment,
            "llm.group": reply.model_group or "",
            "llm.model": model,
            "llm.outcome": outcome,
            "llm.fallback": reply.fallback_used,
            "llm.tool_calls": len(reply.tool_calls),
            "llm.cost_usd": reply.cost_usd,
            "gen_ai.usage.input_tokens": reply.prompt_tokens,
            "gen_ai.usage.output_tokens": reply.completion_tokens,
        }
    )
    if reply.fallback_used:
        current.add_event(
            "fallback",
            {
                "answered_by": deployment,
                "failed_deployments": [f.get("deployment", "unknown") for f in reply.failed_deployments],
            },
        )
