""" "Test this deployment": one short call through the project's model gateway, nothing stored: a
completion for a chat deployment, a second of silence for a transcription deployment, a tiny picture
for a vision deployment."""

from __future__ import annotations

import base64
import dataclasses
import io
import time
import uuid
import wave
from dataclasses import dataclass
from typing import Literal

import httpx

from switchboard.crypto import CredentialCipher
from switchboard.egress import EgressPolicy, EgressRefused
from switchboard.i18n import N_
from switchboard.llm.config import DeploymentSettings, LLMSettings, is_platform_default
from switchboard.llm.keys import missing_key_reason
from switchboard.settings import Settings

__all__ = ["ProbeKind", "ProbeResult", "probe_deployment", "probe_url", "plain_words", "PROBE_PROMPT"]

PROBE_PROMPT = "This is a connection test. Reply with one short sentence."
ProbeKind = Literal["chat", "transcription", "vision"]
"""What a tested deployment does: answer (``llm.deployments``), transcribe (``llm.transcription``) or
describe a picture (``llm.vision``)."""


def _silence_wav(seconds: float = 1.0, rate: int = 16_000) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(b"\0\0" * int(seconds * rate))
    return buf.getvalue()


PROBE_AUDIO = _silence_wav()
"""One second of 16 kHz mono silence (WAV): what a transcription test uploads."""
PROBE_IMAGE_URL = (
    "data:image/png;base64,"
    + base64.b64encode(
        bytes.fromhex(
            "89504e470d0a1a0a0000000d49484452000000010000000108020000009077"
            "53de0000000c4944415408d763f8cfc000000301010018dd8db00000000049454e44ae426082"
        )
    ).decode()
)
"""A one-pixel red PNG: what a vision test shows the model."""
PROBE_VISION_PROMPT = "This is a connection test. Name the colour of this picture in one word."
PROBE_TIMEOUT_S = 20.0
"""The whole probe's budget (one request, no retries, no fallback)."""


@dataclass(frozen=True, kw_only=True)
class ProbeResult:
    """What one test call of a deployment gave."""

    ok: bool
    deployment_id: str
    answer: str | None = None
    error: str | None = None
    duration_ms: float = 0.0
    url: str | None = None
    """The address the call went to (the deployment's ``api_base``, else its provider's API)."""


PROVIDER_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
"""Where a deployment without ``api_base`` is called, named in a failed test."""


def probe_url(deployment: DeploymentSettings) -> str | None:
    """The address a test of ``deployment`` goes to (``None`` when its provider has no known one)."""
    return deployment.api_base or PROVIDER_URLS.get(deployment.provider)


async def probe_deployment(
    settings: Settings, deployment: DeploymentSettings, kind: ProbeKind = "chat"
) -> ProbeResult:
    """Like :func:`_probe`, with the address tried in the result (:attr:`ProbeResult.url`)."""
    result = await _probe(settings, deployment, kind)
    return dataclasses.replace(result, url=probe_url(deployment))


async def _probe(settings: Settings, deployment: DeploymentSettings, kind: ProbeKind = "chat") -> ProbeResult:
    """Call ``deployment`` once (its stored key decrypted with ``ENCRYPTION_KEY``) and report.

    The key is chosen as for every call (:func:`switchboard.llm.keys.choose_key`); a deployment that
    would go out without one is not called, and the result says why in plain words.

    A router of its own (a fresh id), no retries, no other group: the answer says whether this one
    deployment works. Never raises for a provider's failure (it is the result). An ``api_base`` the
    outbound-address policy refuses is not called at all: the error says the policy refused it (and
    the policy holds again for the connection itself, :mod:`switchboard.egress`).
    """
    from switchboard.llm.router import ModelCallFailed, ModelGateway

    started = time.perf_counter()
    if deployment.api_base:
        try:
            await EgressPolicy.for_models(settings).check(deployment.api_base)
        except EgressRefused as exc:
            return ProbeResult(ok=False, deployment_id=deployment.id, error=str(exc))
    if not deployment.api_key_encrypted:
        why = missing_key_reason(
            settings,
            provider=deployment.provider,
            api_base=deployment.api_base,
            platform_default=is_platform_default(settings, deployment),
        )
        if why is not None:  # the call would go out without a key: say why instead of a provider's 401
            return ProbeResult(ok=False, deployment_id=deployment.id, error=why)
    gateway = ModelGateway(
        settings=settings, cipher=CredentialCipher(settings.secret("encryption_key").encode())
    )
    llm = LLMSettings(deployments=[deployment], num_retries=0, request_timeout_s=PROBE_TIMEOUT_S)
    try:
        router = gateway.router_for(uuid.uuid4(), llm)
        router.record_metrics = False  # a test is no traffic: its throwaway tenant id adds no series
        if kind == "transcription":
            reply = await gateway.transcribe(
                router,
                ("probe.wav", PROBE_AUDIO, "audio/wav"),
                llm=llm,
                trace_id=f"probe-{deployment.id}",
                deadline=time.monotonic() + PROBE_TIMEOUT_S,
            )
            # one second of silence: any answer, words or none, shows the deployment transcribes
            return ProbeResult(
                ok=True,
                deployment_id=deployment.id,
                answer=(reply.content or "").strip()[:500] or None,  # None: "no words" in the page
                duration_ms=reply.duration_ms,
            )
        reply = await gateway.complete(
            router,
            [{"role": "user", "content": PROBE_PROMPT}]
            if kind == "chat"
            else [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": PROBE_VISION_PROMPT},
                        {"type": "image_url", "image_url": {"url": PROBE_IMAGE_URL, "detail": "low"}},
                    ],
                }
            ],
            tools=None,
            llm=llm,
            trace_id=f"probe-{deployment.id}",
            deadline=time.monotonic() + PROBE_TIMEOUT_S,
        )
    except ModelCallFailed as exc:
        detail = "; ".join(f.get("error", "") for f in exc.failed_deployments) or str(exc.error)
        refused = _refusal(exc.error)
        if refused is not None:  # the address changed since the check above (DNS): the policy's words only
            detail = refused
        else:
            detail = plain_words(exc.error) or detail
        return ProbeResult(
            ok=False,
            deployment_id=deployment.id,
            error=detail[:500],
            duration_ms=(time.perf_counter() - started) * 1000,
        )
    except Exception as exc:  # a bad key token, an unknown provider setting: shown, not raised
        return ProbeResult(
            ok=False,
            deployment_id=deployment.id,
            error=f"{type(exc).__name__}: {exc}"[:500],
            duration_ms=(time.perf_counter() - started) * 1000,
        )
    text = (reply.content or "").strip()
    return ProbeResult(
        ok=bool(text),
        deployment_id=deployment.id,
        answer=text[:500] or None,
        error=None if text else "empty answer",
        duration_ms=reply.duration_ms,
    )


_STATUS_WORDS = {
    400: N_("the provider refused the request (400)"),
    401: N_("the key was rejected (401)"),
    403: N_("the key may not use this model (403)"),
    404: N_("no such model or address (404)"),
    429: N_("the provider is limiting requests or the account has no credit (429)"),
}


def plain_words(error: BaseException | None) -> str | None:
    """What a provider error means in words (``"connection refused"``, ``"the key was rejected
    (401)"``), found in its chain of causes (LiteLLM wraps the SDK's, which wraps httpx's); ``None``
    when it is none of the known kinds (the provider's own text is shown then). The words are
    gettext messages: ``_probe.html`` shows them in the reader's language."""
    chain: list[BaseException] = []
    while error is not None and len(chain) < 10:
        chain.append(error)
        error = error.__cause__ or error.__context__
    for link in chain:
        status = getattr(link, "status_code", None)
        if isinstance(status, int) and status in _STATUS_WORDS:
            return _STATUS_WORDS[status]
    if any(isinstance(link, ConnectionRefusedError) for link in chain):
        return N_("could not connect: connection refused")
    if any(isinstance(link, httpx.TimeoutException) for link in chain):
        return N_("no answer in time (20 seconds)")
    if any(isinstance(link, httpx.ConnectError) for link in chain):
        return N_("could not connect: no server answered at that address")
    return None


def _refusal(error: BaseException | None) -> str | None:
    """The policy's refusal inside a provider error (LiteLLM wraps it), if that is what it was."""
    seen = 0
    while error is not None and seen < 10:
        if isinstance(error, EgressRefused):
            return str(error)
        error, seen = error.__cause__ or error.__context__, seen + 1
    return None
