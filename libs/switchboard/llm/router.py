"""The model gateway: one LiteLLM ``Router`` per tenant, a process-wide concurrency bound, fallback reports.

DESIGN.md, "The LLM layer is a Router". For each tenant the deployments are ordered by priority into
groups (``p<priority>``); the first group is called and the others are its ``fallbacks`` in order.
``allowed_fails``/``cooldown_time``/``timeout``/``num_retries`` come from the tenant's
:class:`~switchboard.llm.config.LLMSettings`; provider SDK retries are off (``max_retries=0``) so the
retry policy lives in the Router. Every call holds the gateway's semaphore (default 50 process-wide).

LiteLLM facts this relies on (LIBRARIES.md §7): ``Router`` cannot be subclassed; in-group failover
needs ``num_retries >= 1``; the answering deployment is ``response._hidden_params["model_id"]`` (our
readable ``model_info.id``) and ``_hidden_params["additional_headers"]["x-litellm-attempted-fallbacks"]``
counts fallbacks; all groups failing re-raises the original error.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any, Protocol

from switchboard.crypto import CredentialCipher, CredentialDecryptError
from switchboard.llm import import_litellm
from switchboard.llm.config import DeploymentSettings, LLMSettings, default_deployments
from switchboard.observability import get_logger
from switchboard.settings import Settings

if TYPE_CHECKING:  # litellm is imported on first use (switchboard.llm.import_litellm)
    from litellm import Router

__all__ = ["ModelGateway", "ModelReply", "TenantRouter", "ModelCallFailed", "ContextOverflow"]

log = get_logger(__name__)

DEFAULT_MAX_CONCURRENT_CALLS = 50
"""Process-wide bound on concurrent model calls (DESIGN.md)."""
_FAILURE_MEMORY = 2048
"""Calls whose failures the recorder remembers at most (oldest forgotten first)."""
_CALL_KEY = "switchboard_call_id"


class ModelCallFailed(Exception):
    """Every deployment of every group failed (after retries and fallbacks); ``error`` is LiteLLM's."""

    def __init__(self, error: BaseException) -> None:
        self.error = error
        super().__init__(f"{type(error).__name__}: {str(error)[:300]}")


class ContextOverflow(ModelCallFailed):
    """The provider said the prompt is longer than the model's context window."""


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


@dataclass
class TenantRouter:
    """A tenant's Router and what was derived with it."""

    router: Router
    fingerprint: str
    first_group: str
    deployments: list[DeploymentSettings]
    context_window_tokens: int
    """Smallest context window among the deployments (tokens)."""
    count_model: str
    """LiteLLM model name used to count tokens (the first deployment's)."""


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
        self._recorder: _FailureRecorder | None = None
        """Registered with LiteLLM by the first :meth:`router_for` (so LiteLLM loads on first use)."""

    # --- routers -----------------------------------------------------------------------------
    def _api_key(self, deployment: DeploymentSettings) -> str:
        if deployment.api_key_encrypted:
            try:
                return str(self.cipher.decrypt(deployment.api_key_encrypted)["api_key"])
            except (CredentialDecryptError, KeyError) as exc:
                log.error("deployment_api_key_unreadable", deployment=deployment.id)
                raise CredentialDecryptError(f"api key of deployment {deployment.id} is unreadable") from exc
        if deployment.provider == "openai" and self.settings.openai_api_key is not None:
            return self.settings.openai_api_key.get_secret_value()
        if deployment.provider == "anthropic" and self.settings.anthropic_api_key is not None:
            return self.settings.anthropic_api_key.get_secret_value()
        return "not-needed"  # Ollama, the offline server and many OpenAI-compatible servers take any key

    def _context_window(self, deployment: DeploymentSettings, llm: LLMSettings) -> int:
        if deployment.max_input_tokens:
            return deployment.max_input_tokens
        try:
            info = import_litellm().get_model_info(deployment.litellm_model())
            return int(info.get("max_input_tokens") or llm.default_context_window_tokens)
        except Exception:  # ModelNotMappedError and friends: unknown model
            return llm.default_context_window_tokens

    def router_for(self, tenant_id: uuid.UUID, llm: LLMSettings) -> TenantRouter:
        """The tenant's Router, built on first use and rebuilt when ``llm`` changed.

        Raises:
            CredentialDecryptError: a deployment's ``api_key_encrypted`` cannot be decrypted (logged
                as ``deployment_api_key_unreadable`` with the deployment id).
        """
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
        cached = self._routers.get(tenant_id)
        if cached is not None and cached.fingerprint == fingerprint:
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
                "timeout": deployment.timeout_s or llm.request_timeout_s,
            }
            if deployment.api_base:
                params["api_base"] = deployment.api_base
            info: dict[str, Any] = {"id": deployment.id}
            if deployment.max_input_tokens:
                info["max_input_tokens"] = deployment.max_input_tokens
            model_list.append({"model_name": group, "litellm_params": params, "model_info": info})
        ordered = list(dict.fromkeys(groups.values()))
        router = litellm.Router(
            model_list=model_list,
            fallbacks=[{ordered[0]: ordered[1:]}] if len(ordered) > 1 else [],
            num_retries=llm.num_retries,
            allowed_fails=llm.allowed_fails,
            cooldown_time=llm.cooldown_s,
            timeout=llm.request_timeout_s,
        )
        built = TenantRouter(
            router=router,
            fingerprint=fingerprint,
            first_group=ordered[0],
            deployments=deployments,
            context_window_tokens=min(self._context_window(d, llm) for d in deployments),
            count_model=deployments[0].litellm_model(),
        )
        self._routers[tenant_id] = built
        log.info(
            "router_built",
            tenant_id=str(tenant_id),
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
    ) -> ModelReply:
        """One chat completion through the tenant's Router, inside the semaphore.

        Args:
            tenant_router: from :meth:`router_for`.
            messages: OpenAI chat messages (already trimmed).
            tools: OpenAI tool definitions, or ``None``/``[]`` for a words-only call.
            trace_id: recorded in LiteLLM metadata and logs.

        Raises:
            ContextOverflow: the provider rejected the prompt as too long (after fallbacks).
            ModelCallFailed: every deployment failed (timeouts, 5xx, 429...) after retries/fallbacks.
        """
        call_id = uuid.uuid4().hex
        kwargs: dict[str, Any] = {
            "model": tenant_router.first_group,
            "messages": messages,
            "metadata": {_CALL_KEY: call_id, "trace_id": trace_id},
        }
        if tools:
            kwargs["tools"] = tools
            kwargs["tool_choice"] = "auto"
        if llm.max_output_tokens:
            kwargs["max_tokens"] = llm.max_output_tokens
        litellm = import_litellm()
        recorder = self._recorder if self._recorder is not None else _recorder()
        started = time.perf_counter()
        async with self.semaphore:
            try:
                response = await tenant_router.router.acompletion(**kwargs)
            except litellm.ContextWindowExceededError as exc:
                failures = recorder.take(call_id)
                log.warning("model_context_overflow", trace_id=trace_id, failed_deployments=failures)
                raise ContextOverflow(exc) from exc
            except Exception as exc:  # LiteLLM/OpenAI errors of every kind: all groups failed
                failures = recorder.take(call_id)
                log.error(
                    "model_call_failed",
                    trace_id=trace_id,
                    error=f"{type(exc).__name__}: {str(exc)[:300]}",
                    failed_deployments=failures,
                )
                raise ModelCallFailed(exc) from exc
        duration_ms = (time.perf_counter() - started) * 1000
        hidden = getattr(response, "_hidden_params", {}) or {}
        headers = hidden.get("additional_headers") or {}
        attempted_fallbacks = int(headers.get("x-litellm-attempted-fallbacks") or 0)
        failures = recorder.take(call_id)
        model_id = hidden.get("model_id")
        if attempted_fallbacks:
            log.warning(
                "model_fallback",
                trace_id=trace_id,
                answered_by=model_id,
                answered_group=headers.get("x-litellm-model-group"),
                failed_deployments=failures
                or [{"deployment": d.id, "error": "unavailable"} for d in tenant_router.deployments[:1]],
            )
        choice = response.choices[0]
        message = choice.message
        tool_calls = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.function.name, "arguments": call.function.arguments or ""},
            }
            for call in (getattr(message, "tool_calls", None) or [])
        ]
        usage = getattr(response, "usage", None)
        return ModelReply(
            content=message.content,
            tool_calls=tool_calls,
            model_id=model_id,
            model_group=headers.get("x-litellm-model-group"),
            fallback_used=attempted_fallbacks > 0,
            failed_deployments=failures,
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            duration_ms=duration_ms,
        )
