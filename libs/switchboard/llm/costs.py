"""Token cost of model calls and the cost ranking of a tenant's deployment groups.

Prices come from LiteLLM's model cost map read offline (``LITELLM_LOCAL_MODEL_COST_MAP=True``, set by
``switchboard/__init__.py`` before LiteLLM loads): ``litellm.cost_per_token(model=..., prompt_tokens=...,
completion_tokens=...)`` gives USD for the prompt and the completion. A model the map does not know
(the offline server, Ollama, most OpenAI-compatible servers) is *unpriced*: it costs 0 here and the
turn counts its unpriced calls (``timings["unpriced_calls"]``), so a zero is never mistaken for a
measured one. (LiteLLM's Router registers every deployment in the map, unknown ones at price 0, so a
call with tokens and a zero price counts as unpriced too.)

Groups (:class:`~switchboard.llm.router.RouterGroup`, ``p<priority>``) and "the cheapest group":
the group whose most expensive deployment has the lowest price of 1,000 prompt plus 1,000
completion tokens; ties go to the earlier group (lower priority number).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from functools import lru_cache

from switchboard.llm import import_litellm
from switchboard.llm.config import DeploymentSettings, LLMSettings

__all__ = [
    "CallCost",
    "call_cost",
    "transcription_cost",
    "group_name",
    "group_price_usd",
    "cheapest_group",
    "only_group",
    "group_router_key",
]

_REFERENCE_TOKENS = 1_000
"""Prompt and completion tokens of the reference call groups are ranked by."""


@dataclass(frozen=True)
class CallCost:
    """The cost of one model call."""

    usd: float
    """Prompt plus completion cost in US dollars (0 when unpriced)."""
    priced: bool
    """Whether LiteLLM's cost map knows the model."""


@lru_cache(maxsize=4096)
def _price(litellm_model: str, prompt_tokens: int, completion_tokens: int) -> CallCost:
    """LiteLLM's price, kept per (model, tokens): the map is read once, offline, and the Router only adds
    zero prices for models it does not know (unpriced either way), so an answer never changes; pricing
    walks several lookups (about 1 ms per call) and the guardrail prices every group for each turn."""
    litellm = import_litellm()
    try:
        prompt_usd, completion_usd = litellm.cost_per_token(
            model=litellm_model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
        )
    except Exception:  # ModelNotMappedError (not exported under one name across releases): unpriced
        return CallCost(0.0, False)
    usd = float(prompt_usd) + float(completion_usd)
    # the Router registers every deployment in LiteLLM's map, unknown ones at price 0: zero for a call
    # that used tokens means the map has no price for the model
    return CallCost(usd, usd > 0 or prompt_tokens + completion_tokens == 0)


def call_cost(deployment: DeploymentSettings | None, prompt_tokens: int, completion_tokens: int) -> CallCost:
    """USD of one call of ``deployment`` (``None``: the answering deployment is unknown: unpriced)."""
    if deployment is None:
        return CallCost(0.0, False)
    return _price(deployment.litellm_model(), max(0, prompt_tokens), max(0, completion_tokens))


@lru_cache(maxsize=1024)
def _transcription_price(litellm_model: str, audio_seconds: float) -> CallCost:
    litellm = import_litellm()
    try:
        prompt_usd, completion_usd = litellm.cost_per_token(
            model=litellm_model, call_type="atranscription", audio_transcription_file_duration=audio_seconds
        )
    except Exception:  # ModelNotMappedError: unpriced
        return CallCost(0.0, False)
    usd = float(prompt_usd) + float(completion_usd)
    return CallCost(usd, usd > 0)


def transcription_cost(deployment: DeploymentSettings | None, audio_seconds: float | None) -> CallCost:
    """USD of transcribing ``audio_seconds`` of audio with ``deployment``: LiteLLM's per-second price of
    the model (``whisper-1``: 0.0001 USD a second). Unpriced (0) when the deployment or the length is
    unknown, or the map has no price for the model."""
    if deployment is None or not audio_seconds or audio_seconds <= 0:
        return CallCost(0.0, False)
    return _transcription_price(deployment.litellm_model(), round(float(audio_seconds), 3))


def group_name(deployment: DeploymentSettings) -> str:
    """The Router group a deployment belongs to (``p<priority>``, as :mod:`switchboard.llm.router` names them)."""
    return f"p{deployment.priority}"


def group_price_usd(deployments: list[DeploymentSettings], group: str) -> float:
    """Price of the reference call (1,000 + 1,000 tokens) on the group's most expensive deployment."""
    return max(
        (
            call_cost(d, _REFERENCE_TOKENS, _REFERENCE_TOKENS).usd
            for d in deployments
            if group_name(d) == group
        ),
        default=0.0,
    )


def cheapest_group(deployments: list[DeploymentSettings]) -> str:
    """The cheapest group of ``deployments`` (module docstring).

    Raises:
        ValueError: no deployments.
    """
    if not deployments:
        raise ValueError("no deployments")
    groups = sorted({d.priority for d in deployments})
    return min((f"p{p}" for p in groups), key=lambda g: (group_price_usd(deployments, g), int(g[1:])))


def only_group(llm: LLMSettings, deployments: list[DeploymentSettings], group: str) -> LLMSettings:
    """``llm`` with only the deployments of ``group`` (a Router that never falls back to other groups).

    Raises:
        ValueError: no deployment is in ``group``.
    """
    chosen = [d for d in deployments if group_name(d) == group]
    if not chosen:
        raise ValueError(
            f"no deployment group {group!r} (groups: {sorted({group_name(d) for d in deployments})})"
        )
    return llm.model_copy(update={"deployments": chosen})


def group_router_key(tenant_id: uuid.UUID, purpose: str) -> uuid.UUID:
    """Cache key of a tenant's second Router (``ModelGateway.router_for``), e.g. ``guardrails`` or
    ``group:p2``: derived, so it never collides with the tenant's own."""
    return uuid.uuid5(tenant_id, purpose)
